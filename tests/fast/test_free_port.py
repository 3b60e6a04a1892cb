"""free_port() hands out listening ports below the kernel's ephemeral range, where no outgoing connection can take
one between the handing out and the server's bind, never one that a listener holds, and never the same one twice in
a row."""

from __future__ import annotations

import socket

from lab.servers import processes


def test_ports_come_from_below_the_ephemeral_range_and_differ():
    ports = [processes.free_port() for _ in range(50)]
    low = int(processes.EPHEMERAL_RANGE.read_text().split()[0])
    assert len(set(ports)) == len(ports)
    assert all(processes.LISTEN_PORTS_FROM <= port < low for port in ports)


def test_a_port_a_listener_holds_is_passed_over(monkeypatch):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", processes.free_port()))
        held.listen()
        taken = held.getsockname()[1]
        monkeypatch.setattr(processes, "_next_port", taken)  # the next one handed out would be the held port
        assert processes.free_port() == taken + 1


def test_without_room_below_the_ephemeral_range_the_kernel_chooses(monkeypatch, tmp_path):
    real_low = int(processes.EPHEMERAL_RANGE.read_text().split()[0])
    narrow = tmp_path / "ip_local_port_range"
    narrow.write_text("10500\t60999\n")
    monkeypatch.setattr(processes, "EPHEMERAL_RANGE", narrow)
    assert processes._listen_ports() is None
    assert processes.free_port() >= real_low  # bound to port 0: the kernel's own choice, from its real range
