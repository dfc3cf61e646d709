# SPDX-License-Identifier: MIT
# bench/cxx/tcp-phases.awk (busybox awk in the guest; phases-vm-tcp.sh runs it):
# reads the text of the kernel's trace buffer (events raw_syscalls:sys_enter
# and sys_exit, sched:sched_switch and sched_wakeup, net:net_dev_xmit and
# netif_receive_skb, irq:irq_handler_entry) and cuts the round trips of thread
# T (-v T=TID, the bench's main thread) into phases. A round trip starts when
# T enters the send of a message: sendto(2) is the plain loop's (prefix p_),
# sendmsg(2) the channel's (c_). Prints one "PHASE MICROSECONDS" line per phase
# and round trip (the caller takes medians):
#   send   the send call, entry to exit; tx: entry to the frame's net_dev_xmit
#   u1     user space from the send's return to the receive's call
#   pre    the receive's call to T's switch out (it sleeps)
#   wait   asleep until the peer's frame arrives (netif_receive_skb): the
#          peer's turn and both transits through the emulators and the hub
#   soft   the frame's arrival to T's wake-up (the receive path in softirq)
#   lat    T's wake-up to its switch in
#   post   switch in to the receive call's return
#   u2     user space from the receive's return to the next send's call
#   total  one send's call to the next one's
#   sendirq  interrupts taken during the send call (count)
# A receive that returns without sleeping gives "recvnosleep" instead of
# pre..post.
function stamp(i) {
  for (i = 1; i <= NF; i++)
    if ($i ~ /^[0-9]+\.[0-9]+:$/) {
      sub(":", "", $i)
      return $i * 1e6
    }
  return -1
}
function task(i) {
  i = match($1, /-[0-9]+$/)
  return i ? substr($1, i + 1) + 0 : -1
}
function nr() {
  match($0, /NR [0-9]+/)
  return substr($0, RSTART + 3, RLENGTH - 3) + 0
}
function emit(t) {
  if (se <= 0)
    return
  print K "total", t - se
  print K "send", sx - se
  print K "sendirq", sirq
  if (tx > 0)
    print K "tx", tx - se
  if (re > 0)
    print K "u1", re - sx
  if (so > 0 && rx > 0 && wk > 0 && si > 0 && rxit > 0) {
    print K "pre", so - re
    print K "wait", rx - so
    print K "soft", wk - rx
    print K "lat", si - wk
    print K "post", rxit - si
  } else if (rxit > 0 && re > 0) {
    print K "recvnosleep", rxit - re
  }
  if (rxit > 0)
    print K "u2", t - rxit
}
{
  t = stamp()
  if (t < 0)
    next
}
/sys_enter: NR/ {
  if (task() != T)
    next
  n = nr()
  if (n == 44 || n == 46) { # sendto, sendmsg
    emit(t)
    K = n == 44 ? "p_" : "c_"
    se = t
    sx = tx = re = so = rx = wk = si = rxit = sirq = 0
    insend = 1
  } else if ((n == 45 || n == 47) && sx > 0 && re == 0) { # recvfrom, recvmsg
    re = t
    inrecv = 1
  }
  next
}
/sys_exit: NR/ {
  if (task() != T)
    next
  n = nr()
  if ((n == 44 || n == 46) && insend) {
    sx = t
    insend = 0
  } else if ((n == 45 || n == 47) && inrecv) {
    rxit = t
    inrecv = 0
  }
  next
}
/irq_handler_entry:/ {
  if (insend)
    sirq++
  next
}
/net_dev_xmit:/ {
  if (se > 0 && tx == 0)
    tx = t
  next
}
/sched_switch:/ {
  if (inrecv && so == 0 && $0 ~ ("prev_pid=" T " "))
    so = t
  if (inrecv && wk > 0 && si == 0 && $0 ~ ("next_pid=" T " "))
    si = t
  next
}
/netif_receive_skb:/ {
  if (so > 0 && rx == 0)
    rx = t
  next
}
/sched_wakeup:/ {
  if (rx > 0 && wk == 0 && $0 ~ ("pid=" T " "))
    wk = t
}
