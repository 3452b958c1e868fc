/*
 * The client's side of `gwctl capture`: send the request, turn its records into a pcap
 * file (the file header from the first record, the base64 pcap records decoded after
 * it), and say at the end what the daemon captured, filtered out and dropped.
 * Blocking; gwctl's one thread.
 */
#ifndef IBGW_MGMT_CTL_CAPTURE_H
#define IBGW_MGMT_CTL_CAPTURE_H

#include <stdio.h>

struct ctl_client;
struct ctl_capture;

/* Writes the capture to fd (a file, or a pipe to tshark: each write holds whole
 * records). The summary and any error go to msgs. Returns 0 when the capture ran to
 * its end, or -1 (the daemon refused it, the connection failed, fd could not be
 * written: said on msgs). */
int ctl_capture_run(struct ctl_client *cl, const struct ctl_capture *a, int fd, FILE *msgs);

#endif
