"""Jobs over the cache tiers: prewarm (compile ahead of time), cleanup (`dgemm-cache gc`), and
the shape manifests they read."""
