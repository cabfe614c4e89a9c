"""The wire view of the kernel comparison, run in the receiver's namespace.

An AF_PACKET socket (cooked: packets from their IP header) on the receiver's veth timestamps every TCP packet to the
given ports as the kernel takes it in (SO_TIMESTAMPNS: on a veth the stamp is
taken as the sender's qdisc or socket hands the packet over, so neither this
process's nor the receiver's delays move it). Stamps are CLOCK_REALTIME and
are moved to CLOCK_MONOTONIC, the clock of the Node processes. Prints `ready`
once bound; a line on stdin ends the capture, and it prints each port's
packets as one JSON line: {port: {atMs: [...], bytes: [...]}} (TCP payload
bytes; a GSO packet counts whole).

python3 capture.py DEVICE PORT...
"""

import json
import select
import socket
import struct
import sys
import time

ETH_P_IP = 0x0800
SO_TIMESTAMPNS = 35
SO_RCVBUFFORCE = 33


def realtime_minus_monotonic_ns():
    best = None
    for _ in range(20):
        before = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        real = time.clock_gettime_ns(time.CLOCK_REALTIME)
        after = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        if best is None or after - before < best[0]:
            best = (after - before, real - (before + after) // 2)
    return best[1]


def main():
    device, ports = sys.argv[1], [int(p) for p in sys.argv[2:]]
    flows = {port: {"atMs": [], "bytes": []} for port in ports}
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_IP))
    sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 64 << 20)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.bind((device, ETH_P_IP))
    offset_ns = realtime_minus_monotonic_ns()
    print("ready", flush=True)

    def take(data, ancillary, address):
        if address[2] == socket.PACKET_OUTGOING or len(data) < 40 or data[9] != socket.IPPROTO_TCP:
            return
        ip_header = (data[0] & 0x0F) * 4
        total = struct.unpack_from("!H", data, 2)[0]
        port = struct.unpack_from("!H", data, ip_header + 2)[0]
        tcp_header = (data[ip_header + 12] >> 4) * 4
        payload = total - ip_header - tcp_header
        flow = flows.get(port)
        if flow is None or payload <= 0:
            return
        for level, kind, value in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                seconds, nanoseconds = struct.unpack("qq", value[:16])
                flow["atMs"].append((seconds * 1_000_000_000 + nanoseconds - offset_ns) / 1e6)
                flow["bytes"].append(payload)

    while True:
        readable, _, _ = select.select([sock, sys.stdin], [], [])
        if sock in readable:
            data, ancillary, _, address = sock.recvmsg(128, socket.CMSG_SPACE(16))
            take(data, ancillary, address)
        elif sys.stdin in readable:
            break
    # What the socket still holds was on the wire before the end: take it too.
    sock.setblocking(False)
    while True:
        try:
            data, ancillary, _, address = sock.recvmsg(128, socket.CMSG_SPACE(16))
        except BlockingIOError:
            break
        take(data, ancillary, address)
    print(json.dumps(flows), flush=True)


main()
