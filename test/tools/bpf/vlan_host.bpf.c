/*
 * vlan_host: makes an untagged veth behave as a host's 802.1Q VLAN device, for the rack's
 * tests on kernels built without 802.1Q (CONFIG_VLAN_8021Q unset, as on the project's
 * machines): tc egress pushes the VLAN tag on every frame the host sends, tc ingress
 * takes the tag off frames of that VLAN and drops the others (what a VLAN device's host
 * sees). The VLAN ID is fixed at 20, the one test/integration/tenants.sh uses (tc's
 * loader sets no globals). Attach: tc qdisc add dev D clsact; tc filter add dev D egress
 * bpf da obj vlan_host.bpf.o sec tc/egress; the same for ingress. Runs in the kernel.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>

#define SEC(name) __attribute__((section(name), used))

static long (*bpf_skb_vlan_push)(struct __sk_buff *skb, __u16 proto,
				 __u16 tci) = (void *)BPF_FUNC_skb_vlan_push;
static long (*bpf_skb_vlan_pop)(struct __sk_buff *skb) = (void *)BPF_FUNC_skb_vlan_pop;

#define VLAN_ID 20

SEC("tc/egress")
int vlan_push(struct __sk_buff *skb)
{
	if (bpf_skb_vlan_push(skb, __builtin_bswap16(ETH_P_8021Q), VLAN_ID) < 0)
		return TC_ACT_SHOT;
	return TC_ACT_OK;
}

/* The receive path has moved a tag into the skb's metadata (vlan_present) by now. */
SEC("tc/ingress")
int vlan_pop(struct __sk_buff *skb)
{
	if (!skb->vlan_present || (skb->vlan_tci & 0x0fff) != VLAN_ID)
		return TC_ACT_SHOT;
	return bpf_skb_vlan_pop(skb) < 0 ? TC_ACT_SHOT : TC_ACT_OK;
}

char _license[] SEC("license") = "GPL";
