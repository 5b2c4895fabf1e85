#!/usr/bin/env python3
"""Writes the hwloc XML machines the topology tests load.

  gpu8_nic4.xml   2 sockets; per socket two PCIe switches, each with two GPUs
                  and one InfiniBand NIC (GPUs as CUDA and NVML OS devices).
  gpu8_nic8.xml   2 sockets; per socket four PCIe switches, each with one GPU
                  and one NIC (rail-optimised; GPUs seen only by PCI class).
  cpu2s_nic1.xml  2 sockets, no GPU, one Ethernet NIC on socket 1.

Bus numbers interleave GPUs and NICs and NICs are not in GPU order, so a
pairing by position instead of by PCI distance fails the tests.
Run from this directory: python3 make_topologies.py
"""

CORES_PER_SOCKET = 8


class Writer:
    def __init__(self):
        self.lines = []
        self.gp = 0
        self.depth = 0

    def gp_index(self):
        self.gp += 1
        return self.gp

    def open(self, attrs):
        self.lines.append("  " * self.depth + f'<object {attrs} gp_index="{self.gp_index()}">')
        self.depth += 1

    def close(self):
        self.depth -= 1
        self.lines.append("  " * self.depth + "</object>")

    def leaf(self, attrs, infos=()):
        pad = "  " * self.depth
        if not infos:
            self.lines.append(f'{pad}<object {attrs} gp_index="{self.gp_index()}"/>')
            return
        self.lines.append(f'{pad}<object {attrs} gp_index="{self.gp_index()}">')
        for name, value in infos:
            self.lines.append(f'{pad}  <info name="{name}" value="{value}"/>')
        self.lines.append(f"{pad}</object>")


def mask(bits):
    value = 0
    for b in bits:
        value |= 1 << b
    return f"0x{value:08x}"


def sets(cpus, numa):
    c, n = mask(cpus), mask(numa)
    return f'cpuset="{c}" complete_cpuset="{c}" nodeset="{n}" complete_nodeset="{n}"'


def gpu(w, bus, cuda_index=None):
    attrs = f'type="PCIDev" pci_busid="0000:{bus:02x}:00.0" pci_type="0302 [10de:2330] [10de:16c1] a1" pci_link_speed="31.507692"'
    if cuda_index is None:
        w.leaf(attrs)
        return
    w.open(attrs)
    w.leaf(f'type="OSDev" name="cuda{cuda_index}" subtype="CUDA" osdev_type="5"', [("Backend", "CUDA")])
    w.leaf(f'type="OSDev" name="nvml{cuda_index}" subtype="NVML" osdev_type="1"', [("Backend", "NVML")])
    w.close()


def infiniband_nic(w, bus, index):
    w.open(f'type="PCIDev" pci_busid="0000:{bus:02x}:00.0" pci_type="0207 [15b3:101b] [15b3:0007] 00" pci_link_speed="31.507692"')
    w.leaf(f'type="OSDev" name="ib{index}" osdev_type="2"', [("Address", "00:00:10:29:fe:80:00:00:00:00:00:00")])
    w.leaf(f'type="OSDev" name="mlx5_{index}" subtype="OpenFabrics" osdev_type="3"', [("NodeGUID", "b859:9f03:00c1:0000")])
    w.close()


def ethernet_nic(w, bus, name):
    w.open(f'type="PCIDev" pci_busid="0000:{bus:02x}:00.0" pci_type="0200 [8086:1563] [8086:35d4] 01" pci_link_speed="7.876923"')
    w.leaf(f'type="OSDev" name="{name}" osdev_type="2"', [("Address", "3c:ec:ef:00:00:01")])
    w.close()


def switch(w, secondary, subordinate, contents):
    w.open(f'type="Bridge" pci_busid="0000:{secondary - 1:02x}:01.0" pci_type="0604 [10b5:87b0] [0000:0000] b0" '
           f'pci_link_speed="31.507692" bridge_type="1-1" depth="1" bridge_pci="0000:[{secondary:02x}-{subordinate:02x}]"')
    contents()
    w.close()


def machine(name, io_of_socket):
    w = Writer()
    all_cpus = range(2 * CORES_PER_SOCKET)
    w.lines += ['<?xml version="1.0" encoding="UTF-8"?>', '<!DOCTYPE topology SYSTEM "hwloc2.dtd">',
                '<topology version="2.0">']
    w.depth = 1
    w.open(f'type="Machine" os_index="0" {sets(all_cpus, [0, 1])} allowed_cpuset="{mask(all_cpus)}" '
           f'allowed_nodeset="{mask([0, 1])}"')
    w.lines.append("  " * w.depth + f'<info name="HostName" value="{name}"/>')
    for socket in range(2):
        cpus = range(socket * CORES_PER_SOCKET, (socket + 1) * CORES_PER_SOCKET)
        w.open(f'type="Package" os_index="{socket}" {sets(cpus, [socket])}')
        w.leaf(f'type="NUMANode" os_index="{socket}" {sets(cpus, [socket])} local_memory="274877906944"')
        for cpu in cpus:
            w.open(f'type="Core" os_index="{cpu}" {sets([cpu], [socket])}')
            w.leaf(f'type="PU" os_index="{cpu}" {sets([cpu], [socket])}')
            w.close()
        base = 0x10 + 0x80 * socket
        w.open(f'type="Bridge" bridge_type="0-1" depth="0" bridge_pci="0000:[{base:02x}-{base + 0x7f:02x}]"')
        io_of_socket(w, socket, base)
        w.close()
        w.close()
    w.close()
    w.lines.append("</topology>")
    with open(name + ".xml", "w") as f:
        f.write("\n".join(w.lines) + "\n")


def gpu8_nic4(w, socket, base):
    for s in range(2):
        sw = 2 * socket + s              # switch 0..3 holds GPUs 2sw, 2sw+1 and NIC mlx5_(3-sw)
        bus = base + 0x10 + 0x20 * s
        first_gpu = 2 * sw

        def contents():
            gpu(w, bus + 1, first_gpu)
            infiniband_nic(w, bus + 2, 3 - sw)   # NIC names run opposite to bus order
            gpu(w, bus + 3, first_gpu + 1)
        switch(w, bus, bus + 0x1f, contents)


def gpu8_nic8(w, socket, base):
    for s in range(4):
        sw = 4 * socket + s
        bus = base + 0x10 + 0x10 * s

        def contents():
            infiniband_nic(w, bus + 1, sw)
            gpu(w, bus + 2)
        switch(w, bus, bus + 0x0f, contents)


def cpu2s_nic1(w, socket, base):
    if socket == 1:
        ethernet_nic(w, base + 1, "enp145s0f0")


if __name__ == "__main__":
    machine("gpu8_nic4", gpu8_nic4)
    machine("gpu8_nic8", gpu8_nic8)
    machine("cpu2s_nic1", cpu2s_nic1)
