#!/usr/bin/env bash
# Stage a redis-server and redis-py from this host into DEST (default .redis) for a GPU machine
# that has neither (bench/gpu_verify_t0.sh's ddp mode uses DEST/bin/redis-server with
# LD_LIBRARY_PATH=DEST/lib and PYTHONPATH=DEST/py):
#     bash bench/stage_redis.sh /work/main/.wt-training/.redis
# Copies the binary, the shared libraries it links beyond glibc and libstdc++ (the GPU image's
# own are newer), and the installed `redis` package without bytecode; then checks that the
# staged server starts and answers PING with only those libraries added.
set -euo pipefail
dest=${1:-.redis}
server=$(command -v redis-server)
mkdir -p "$dest/bin" "$dest/lib" "$dest/py"
cp -L "$server" "$dest/bin/redis-server"
ldd "$server" | awk '/=> \// {print $3}' | while read -r lib; do
  case $(basename "$lib") in
    libc.so.*|libm.so.*|libstdc++.so.*|libgcc_s.so.*|ld-linux*) ;;
    *) cp -L "$lib" "$dest/lib/";;
  esac
done
package=$(python3 -c "import os, redis; print(os.path.dirname(redis.__file__))")
rm -rf "$dest/py/redis"
cp -r "$package" "$dest/py/redis"
find "$dest/py" -name __pycache__ -type d -prune -exec rm -rf {} +
port=$(python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
LD_LIBRARY_PATH="$dest/lib" "$dest/bin/redis-server" --port "$port" --bind 127.0.0.1 --save '' \
  --appendonly no > /dev/null &
pid=$!
trap 'kill $pid 2> /dev/null || true' EXIT
sleep 0.5
PYTHONPATH="$dest/py" python3 -c "import redis; assert redis.Redis(port=$port).ping(); print('staged', redis.__version__, 'in', '$dest')"
du -sh "$dest"
