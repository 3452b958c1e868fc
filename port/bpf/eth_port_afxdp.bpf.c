/*
 * The XDP program of an af_xdp Ethernet port (port/eth_port_afxdp.c): compiled with
 * clang -target bpf at build time and built into the daemon (.incbin), loaded once per
 * port and attached to its device through a BPF link (detached when the link's fd
 * closes: at close, at exit, and when the process dies).
 *
 * It redirects to the port's AF_XDP socket of the receiving queue (xsks[rx_queue_index])
 * the frames of the port's VLAN, and passes every other frame to the kernel's stack:
 *   vlan 0   untagged frames and priority-tagged ones (802.1Q, VID 0)
 *   vlan N   frames whose outer tag is 802.1Q with VID N
 * An 802.1ad (S-tagged) frame is never the port's. A tag the device or the sender's
 * driver carries outside the frame (hardware VLAN stripping, a veth peer's VLAN device)
 * is not in the bytes XDP sees: such a frame looks untagged here (docs/ethernet-ports.md,
 * "af_xdp: VLANs").
 * A queue without a socket in the map (its socket not yet bound) passes its frames to
 * the kernel: the redirect's fallback action.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

/* The device's RX queues, each the index of its socket. */
struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

/* The port's VLAN, written into .rodata before the program is loaded. */
const volatile __u16 port_vlan = 0;

SEC("xdp")
int ibgw_xsk_vlan(struct xdp_md *ctx)
{
	const __u8 *data = (const __u8 *)(long)ctx->data;
	const __u8 *end = (const __u8 *)(long)ctx->data_end;
	__u16 type, vid = 0;

	if (data + ETH_HLEN > end)
		return XDP_PASS;
	type = (__u16)(data[12] << 8 | data[13]);
	if (type == ETH_P_8021AD)
		return XDP_PASS;
	if (type == ETH_P_8021Q) {
		if (data + ETH_HLEN + 4 > end)
			return XDP_PASS;
		vid = (__u16)((data[14] & 0x0f) << 8 | data[15]);
	}
	if (vid != port_vlan)
		return XDP_PASS;
	return (int)bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
}

char _license[] SEC("license") = "GPL";
