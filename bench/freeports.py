"""Print N different loopback ports (default 1), each free for both TCP and
UDP a moment ago (a DNS listener takes both), drawn from 20000-32000 as
internal/porttest draws them: below Linux's ephemeral range, where the
kernel also picks the local ports of outgoing connections. Picking all of
a run's ports in one call keeps them different, which two port-0 picks in
a row are not always.

    python3 bench/freeports.py N
"""
import random
import socket
import sys


def free(port):
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        s = socket.socket(socket.AF_INET, kind)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        finally:
            s.close()
    return True


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    ports = []
    for _ in range(100000):
        if len(ports) == n:
            break
        p = random.randrange(20000, 32000)
        if p not in ports and free(p):
            ports.append(p)
    if len(ports) < n:
        sys.exit(f"freeports: found {len(ports)} of {n} free ports in 20000-32000")
    print(*ports)


main()
