set -u
bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2>/tmp/dg_err && . /tmp/dg_env
mkdir -p /tmp/p; i=0
for item in $(cat bench/results/session11/probe_items.txt); do
  i=$((i+1)); DG_PRINT_CONFIGS=1 timeout 90 python -m bench.probe_configs --one "$item" --rounds 3 --calls 20 > /tmp/p/probe_$i.txt 2>&1
  echo "== $item"; grep -v Warning /tmp/p/probe_$i.txt | grep -v warn | tail -12
done
tar czf $OUT/p.tgz -C /tmp p
