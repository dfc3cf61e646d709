// SPDX-License-Identifier: MIT
// Optional RDMA in a product: one binary, one data path. A transport-neutral
// channel (channel_transport::automatic) moves a buffer between two nodes
// over RDMA when both ends can and over TCP when either cannot; it says which
// transport it used and why, and both ends check an FNV-1a checksum of the
// data.
//
//   rdmadl-example-optional-rdma --listen PORT                        receives
//   rdmadl-example-optional-rdma --connect HOST PORT [--size BYTES]   sends
//
// Out of band (rdmadl::oob on TCP port PORT) the ends trade their channel
// endpoint, the byte count and what each can do, then, after the transfer,
// their checksums. Exit status: 0 moved and verified, 1 failed, 2 bad usage,
// 3 the peer was lost mid-transfer and the transport said so (an error
// completion; a "peer lost: " line says which), 4 the peer was only presumed
// lost after 20 s without a completion (a "peer silent: " line).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <rdmadl/rdmadl.hpp>

using namespace rdmadl;
using namespace std::chrono_literals;

namespace {

// The data moves in 64 KiB chunks, each acknowledged by the receiver (so
// it needs only one chunk of memory), and each chunk as 4 KiB sends, one
// work request each. Why not one 64 KiB send: an RC sender counts its
// retransmissions between two acknowledgements of the peer, and Soft-RoCE
// asks for one acknowledgement per message (or per 64 packets at most). At
// MTU 1024 a 64 KiB send is 64 packets whose every loss or reordering costs
// a retransmission before the next acknowledgement: at 5% loss that is ~4.5
// on average, more than any retry_count allows (7 is "for ever" on
// Soft-RoCE), and a 4 MiB transfer never completed. A 4 KiB send is 4
// packets: ~0.3 retransmissions per acknowledgement, and 7 in a row
// (retry_count 6 exceeded) has odds of about 1e-7 (ci/vm/README.md,
// "Impaired frames").
constexpr std::size_t chunk = 64 * 1024;
constexpr std::size_t piece = 4 * 1024;
constexpr std::size_t pieces = chunk / piece;
constexpr std::uint16_t max_why = 1024;

struct lost { // thrown when the peer goes away mid-transfer
  std::string what;
  bool silence = false; // presumed, not seen: no completion for 20 s
};

std::uint64_t fnv1a(std::uint64_t h, const std::byte *p, std::size_t n) {
  for (std::size_t i = 0; i < n; i++)
    h = (h ^ std::to_integer<std::uint8_t>(p[i])) * 0x100000001b3ull;
  return h;
}

// The sender's data: byte i of the stream, so no buffer of the whole size.
void fill(std::byte *p, std::size_t n, std::uint64_t off) {
  for (std::size_t i = 0; i < n; i++)
    p[i] = std::byte(((off + i) * 2654435761u) >> 11);
}

void put64(std::vector<std::byte> &v, std::uint64_t x) {
  for (int i = 0; i < 8; i++)
    v.push_back(std::byte(x >> (8 * i)));
}
std::uint64_t get64(const std::byte *p) {
  std::uint64_t x = 0;
  for (int i = 0; i < 8; i++)
    x |= std::uint64_t(std::to_integer<std::uint8_t>(p[i])) << (8 * i);
  return x;
}

// What each end tells the other first: its channel endpoint, the byte count
// (receiver: 0), the 8 bytes of its memory the peer may read (see waiter)
// and, as text, what it can do.
struct hello {
  channel_endpoint ep;
  std::uint64_t size = 0;
  remote_region probe;
  std::string can;
};
std::vector<std::byte> encode(const hello &h) {
  auto ep = h.ep.serialize();
  auto pr = h.probe.serialize();
  std::vector<std::byte> v(ep.begin(), ep.end());
  put64(v, h.size);
  v.insert(v.end(), pr.begin(), pr.end());
  auto n = std::min<std::size_t>(h.can.size(), max_why);
  v.insert(v.end(), reinterpret_cast<const std::byte *>(h.can.data()),
           reinterpret_cast<const std::byte *>(h.can.data()) + n);
  return v;
}
result<hello> decode(std::span<const std::byte> b) {
  constexpr std::size_t fixed =
      channel_endpoint::serialized_size + 8 + remote_region::serialized_size;
  if (b.size() < fixed || b.size() > fixed + max_why)
    return errc::bad_size;
  hello h;
  auto ep = channel_endpoint::parse(b.first(channel_endpoint::serialized_size));
  if (!ep)
    return ep.error();
  h.ep = *ep;
  h.size = get64(b.data() + channel_endpoint::serialized_size);
  auto pr = remote_region::parse(
      b.subspan(channel_endpoint::serialized_size + 8, remote_region::serialized_size));
  if (!pr)
    return pr.error();
  h.probe = *pr;
  h.can.assign(reinterpret_cast<const char *>(b.data() + fixed), b.size() - fixed);
  return h;
}

// Waits in scope s for h. A lost peer must show as an error completion, yet
// while we only wait for the peer's message nothing of ours may be in
// flight: so after each second without a completion we read the peer's 8
// probe bytes (one read at a time). A live peer answers without its program
// (the NIC, or the TCP channel's progress thread); a dead one leaves the
// read unanswered until the transport gives up. 20 s without a completion
// other than a probe's is only the fallback (reported as silence).
class waiter {
public:
  waiter(const local_slice &probe, const remote_region &theirs) : buf_(probe), theirs_(theirs) {}
  void wait(polling_scope &s, work_handle h, const char *what) {
    auto last = std::chrono::steady_clock::now();
    for (;;) {
      if (probing_) {
        auto p = s.wait(probe_, 0ms);
        if (p) {
          probing_ = false;
          if (!p->ok())
            fail(*p, "probe read", what);
        }
      }
      auto r = s.wait(h, 1s);
      if (r) {
        if (!r->ok())
          fail(*r, what, what);
        return;
      }
      if (std::chrono::steady_clock::now() - last > 20s)
        throw lost{std::string("no completion within 20 s (") + what + ")", true};
      if (!probing_) {
        auto p = s.post_read(0, buf_, theirs_);
        if (!p)
          throw lost{"post_read: " + p.error().message()};
        probe_ = *p;
        probing_ = true;
      }
    }
  }
  // A new scope: a probe of the last one is done with it.
  void new_scope() noexcept { probing_ = false; }

private:
  [[noreturn]] static void fail(const work_result &r, const char *which, const char *what) {
    throw lost{"error completion: " + r.error().message() + " (status " + std::to_string(r.status) +
               ", " + which + ") while waiting for the " + what};
  }
  local_slice buf_;
  remote_region theirs_;
  work_handle probe_;
  bool probing_ = false;
};

// Sends (sender) or receives size bytes; returns the checksum. Each 64 KiB
// chunk (its pieces) is answered by an 8-byte acknowledgement, posted with
// the receives of the next chunk, so a receive is always posted before its
// piece comes.
std::uint64_t move(channel &ch, bool sender, std::uint64_t size, const remote_region &peer_probe) {
  std::vector<std::byte> data(chunk), ack(8), probe(8);
  auto md = ch.pd().register_memory(data).value();
  auto ma = ch.pd().register_memory(ack).value();
  auto mp = ch.pd().register_memory(probe).value();
  waiter w(*mp.all(), peer_probe);
  auto posted = [](const result<work_handle> &h) {
    if (!h)
      throw lost{"post: " + h.error().message()};
    return *h;
  };
  // Posts one work request per piece of the first n bytes of data (a send
  // or a receive); the handles go to hs, their count is returned.
  auto post_pieces = [&](polling_scope &s, std::size_t n, work_handle *hs) {
    std::size_t k = 0;
    for (std::size_t off = 0; off < n; off += piece, k++) {
      auto sl = *md.slice(off, std::min(piece, n - off));
      hs[k] = posted(sender ? s.post_send(0, sl) : s.post_recv(0, sl));
    }
    return k;
  };
  work_handle hs[pieces];
  std::uint64_t h = 0xcbf29ce484222325ull, done = 0, shown = 0;
  auto first = static_cast<std::size_t>(std::min<std::uint64_t>(chunk, size));
  if (!sender) { // the first chunk
    auto s = ch.scope();
    w.new_scope();
    for (std::size_t i = 0, k = post_pieces(s, first, hs); i < k; i++)
      w.wait(s, hs[i], "chunk");
  }
  while (done < size) {
    std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(chunk, size - done));
    auto s = ch.scope();
    w.new_scope();
    if (sender) {
      fill(data.data(), n, done);
      h = fnv1a(h, data.data(), n);
      auto ha = posted(s.post_recv(0, *ma.all()));
      for (std::size_t i = 0, k = post_pieces(s, n, hs); i < k; i++)
        w.wait(s, hs[i], "chunk's completion");
      w.wait(s, ha, "acknowledgement");
    } else {
      h = fnv1a(h, data.data(), n);
      auto next = static_cast<std::size_t>(std::min<std::uint64_t>(chunk, size - done - n));
      std::size_t k = next > 0 ? post_pieces(s, next, hs) : 0;
      w.wait(s, posted(s.post_send(0, *ma.all())), "acknowledgement's completion");
      for (std::size_t i = 0; i < k; i++)
        w.wait(s, hs[i], "chunk");
    }
    done += n;
    if (done - shown >= (4u << 20)) {
      std::printf("progress %llu\n", static_cast<unsigned long long>(done));
      std::fflush(stdout);
      shown = done;
    }
  }
  return h;
}

int usage() {
  std::fprintf(stderr, "usage: rdmadl-example-optional-rdma --listen PORT\n"
                       "       rdmadl-example-optional-rdma --connect HOST PORT [--size BYTES]\n");
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  bool sender = argc >= 4 && std::strcmp(argv[1], "--connect") == 0;
  if (!sender && !(argc == 3 && std::strcmp(argv[1], "--listen") == 0))
    return usage();
  const char *host = sender ? argv[2] : "";
  long port = std::strtol(argv[sender ? 3 : 2], nullptr, 10);
  std::uint64_t size = 16u << 20;
  char *end = nullptr;
  if (sender && argc == 6 && std::strcmp(argv[4], "--size") == 0)
    size = std::strtoull(argv[5], &end, 10);
  if ((sender && argc != 4 && !end) || (end && *end))
    return usage();
  if (port < 1 || port > 65535 || size == 0)
    return usage();
  const auto oob_port = static_cast<std::uint16_t>(port);

  // RDMA when both ends can, else TCP. A peer that stops answering fails a
  // request in flight after (retry_count + 1) transmissions of 4.096 us *
  // 2^ack_timeout each (over TCP: as many keepalive probes, 1 s apart):
  // ~3.8 s here, well inside the 20 s of silence after which it is only
  // presumed lost, and long enough for a live peer in a slow VM. The most
  // retransmissions rxe can give up after (6: 7 is "for ever" there), so
  // that lost frames cost time, not the transfer (see piece); each loss
  // that the next frames cannot reveal (the last frame of a burst, its
  // acknowledgement) costs one timeout.
  channel_options opts;
  opts.transport = channel_transport::automatic;
  opts.connect.transport.ack_timeout = 17; // 0.54 s per transmission
  opts.connect.transport.retry_count = 6;
  auto ch = channel::create(opts);
  if (!ch) {
    std::fprintf(stderr, "channel: %s\n", ch.error().message().c_str());
    return 1;
  }
  std::vector<std::byte> target(8); // what the peer's probes read
  auto mt = ch->pd().register_memory(target, access::remote_read);
  auto ep = ch->local_channel_endpoint();
  if (!mt || !ep) {
    std::fprintf(stderr, "set-up: %s\n", (mt ? ep.error() : mt.error()).message().c_str());
    return 1;
  }
  hello mine{*ep, sender ? size : 0, mt->remote().value(), {}};
  // What this end can do; when RDMA cannot work here, diagnose() gives the
  // one sentence saying why (and what to do).
  mine.can = ep->caps & channel_endpoint::can_rdma ? std::string("RDMA")
                                                   : "no RDMA: " + std::string(diagnose().sentence);
  auto got = oob::exchange(host, oob_port, !sender, encode(mine), 120s);
  auto theirs = got ? decode(*got) : result<hello>(got.error());
  if (!theirs) {
    std::fprintf(stderr, "out-of-band exchange (port %ld): %s %s\n", port,
                 theirs.error().message().c_str(), std::string(last_error_detail()).c_str());
    return 1;
  }
  if (!sender)
    size = theirs->size;
  if (auto c = ch->connect(theirs->ep); !c) {
    std::fprintf(stderr, "connect: %s %s\n", c.error().message().c_str(),
                 std::string(last_error_detail()).c_str());
    return 1;
  }
  const std::string over(name(ch->transport()));
  std::printf("transport: %s (this end: %s; peer: %s)\n%s\n", over.c_str(), mine.can.c_str(),
              theirs->can.c_str(), ch->describe().c_str());
  std::fflush(stdout);

  std::uint64_t h = 0;
  auto t0 = std::chrono::steady_clock::now();
  try {
    h = move(*ch, sender, size, theirs->probe);
  } catch (const lost &e) {
    std::printf("%s: %s\n", e.silence ? "peer silent" : "peer lost", e.what.c_str());
    return e.silence ? 4 : 3;
  }
  auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0);

  // Both ends compare checksums out of band: by then both have every
  // completion, so neither leaves while the other still needs its channel.
  std::vector<std::byte> hb;
  put64(hb, h);
  auto peer = oob::exchange(host, oob_port, !sender, hb, 60s);
  if (!peer || peer->size() != 8) {
    std::fprintf(stderr, "checksum exchange: %s\n",
                 peer ? "not 8 bytes" : peer.error().message().c_str());
    return 1;
  }
  const std::uint64_t peer_h = get64(peer->data());
  const bool ok = h == peer_h;
  std::printf("moved %llu bytes over %s in %.0f ms; checksum %016llx (peer %016llx): %s\n",
              static_cast<unsigned long long>(size), over.c_str(), ms.count(),
              static_cast<unsigned long long>(h), static_cast<unsigned long long>(peer_h),
              ok ? "ok" : "MISMATCH");
  return ok ? 0 : 1;
}
