// SPDX-License-Identifier: MIT
// The TCP transport of a multi_channel: one connection per TCP peer, driven
// by one progress thread per group (wire format: src/tcp_frame.hpp).
//
// Why a thread: RDMA places one-sided writes and serves reads without the
// target's application calling anything, and completes a send only once the
// peer has the bytes. Over TCP, something on the target has to read the
// socket for that to hold; one thread per group, started by start() (from
// multi_channel::connect(), only when a peer is over TCP), named "rdmadl-tcp" and joined by
// the destructor, does it for every peer with non-blocking socket calls and one
// poll(2).
//
// Posting (the application's thread) queues the request in the peer's ring
// (capacity: the channel's depths; full: ENOMEM, as a full RC queue) and,
// when the connection is up, writes what the socket takes at once itself; a
// waiting poll() reads and answers the sockets itself, sleeping in poll(2) on
// them and an eventfd (or, with one peer to watch for input only and no
// other that could complete anything, in a recv(2) on its socket, as a
// blocking socket loop does: a socket is blocking once up, every other call
// passes MSG_DONTWAIT, SO_RCVTIMEO bounds the wait). It sleeps up to the
// caller's wait (channel_state::tcp_wait_until()); what another thread
// completes meanwhile, or a peer it should watch coming up, wakes it through
// that eventfd (wake_app()). The thread is woken only for what it must newly
// watch, and keeps off the sockets while an application thread keeps waiting
// or sleeps on them (it takes them back a few milliseconds after the last
// wait: timer_lead). Whoever holds the mutex moves payloads with sendmsg/recv
// straight between the sockets and the registered buffers, each call inside region_table::use(), so
// every byte lands inside a region that grants the right, and the region cannot end during the
// copy (a waiting thread that blocks in recv(2) for a large payload's rest holds that region
// alone, region_table::use_blocking(), and a failure of that peer flushes the receives and reads
// once that recv(2) is out: read_payload_blocking()). Small frames are read several to a recv(2)
// through a per-peer read-ahead buffer (4 KiB; copied from there to their place inside use() too),
// and written several to a sendmsg(2) (answers, credits riding in the headers (a credit frame of
// its own only once the peer is short of them: credit_due()), then requests, payloads included, up
// to 64 KiB of payload a call; the regions of all of them checked and held by one
// region_table::reader from the batch's making through its first sendmsg(2), the rest of a batch a
// call took part of by one use_each()). A request posted while others to that peer await their
// answers, by a thread that keeps waiting on the engine or behind requests the peer answers with no
// call of its own (see next_batch()), is held back until that thread waits again or an answer is
// read: a window of posts then goes in one sendmsg(2). Requests are answered in order (TCP keeps
// it): a send waits, RNR-like, on the sending side until the peer has announced a posted receive (a
// credit, see tcp_frame.hpp), or goes eagerly into the peer's staging buffer (up to 2 of at most 64
// KiB), so no send ever stops the reading of a connection and the answers behind it (the peer reads
// an eager send into that buffer only once something behind it may be needed, see stage_now(); else
// the receive, once posted, takes it straight from the socket, with no copy); a send or write
// completes on the peer's ack, sent once the bytes are placed in the receive
// or region (an eager send's once a receive took it, as RC's ack means the
// responder placed it), a read on its response. Acks and credits that an
// application's post produces wait for the next frame out while that thread
// keeps waiting on the engine (see next_batch()), and an ack of one request
// waits while the peer's next request is coming in, to answer both
// (ack_waits()).
//
// A peer that closes, resets, or sends a malformed or inconsistent frame is
// failed: its socket is shut, the oldest request completes with
// IBV_WC_RETRY_EXC_ERR (12) and every other one with IBV_WC_WR_FLUSH_ERR (5),
// as a failed RC queue pair's; flush() (this side's timeout) flushes all.
// Other peers are not affected. A peer whose host is gone (no FIN, no RST)
// is failed the same way once keepalive gives up on its idle connection
// (poll(2) reports the error to whichever thread watches the socket, even
// when nothing is to be read or written, as when a send waits for a credit),
// or once bytes written to it stay unacknowledged as long (check_acks(), run
// by the progress thread once per probe interval while some may be): see
// keep_alive(). A peer that owes this side its connection and whose listener
// refuses one is failed at once (the acceptor probes it while it waits).
// All state is under one mutex; no thread holds it while it sleeps in
// poll(2), and every socket call is non-blocking, so a post never waits for
// the network.
#ifndef RDMADL_SRC_TCP_ENGINE_HPP
#define RDMADL_SRC_TCP_ENGINE_HPP

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <vector>

#include "locks.hpp"
#include "rdmadl/multi_channel.hpp"
#include "region_table.hpp"
#include "tcp_frame.hpp"

namespace rdmadl::detail {

struct pd_node;

// One completion of a TCP request.
struct tcp_completion {
  std::uint64_t wr_id = 0;
  std::size_t peer = 0;
  int status = 0; // enum ibv_wc_status
  std::uint32_t byte_len = 0;
};

// A fixed-capacity FIFO (no allocation once made). Indices wrap by a
// compare, not a division: every frame in and out goes through a few of
// these, and a 64-bit division costs tens of cycles (far more under
// emulation).
template <class T> class fifo {
public:
  void reserve(std::size_t n) {
    v_.resize(n);
    cap_ = n;
  }
  bool full() const noexcept { return n_ == cap_; }
  bool empty() const noexcept { return n_ == 0; }
  std::size_t size() const noexcept { return n_; }
  T &operator[](std::size_t i) noexcept { return v_[at(i)]; }
  const T &operator[](std::size_t i) const noexcept { return v_[at(i)]; }
  T &front() noexcept { return v_[h_]; }
  const T &front() const noexcept { return v_[h_]; }
  T &back() noexcept { return v_[at(n_ - 1)]; }
  void push(const T &t) noexcept {
    v_[at(n_)] = t;
    n_++;
  }
  void pop() noexcept {
    if (++h_ == cap_)
      h_ = 0;
    n_--;
  }
  void clear() noexcept { h_ = n_ = 0; }

private:
  // The slot of element i (i <= size(), so h_ + i < 2 * capacity).
  std::size_t at(std::size_t i) const noexcept {
    const std::size_t j = h_ + i;
    return j >= cap_ ? j - cap_ : j;
  }
  std::vector<T> v_;
  std::size_t cap_ = 0; // v_.size(), kept: that is a division by sizeof(T)
  std::size_t h_ = 0, n_ = 0;
};

class tcp_engine {
public:
  // What multi_channel::connect() found for one peer.
  struct peer_setup {
    bool tcp = false;         // false: the peer is over RDMA (not ours)
    std::uint64_t mine = 0;   // the token this side gave the peer
    std::uint64_t theirs = 0; // the token the peer gave this side
    sockaddr_storage addr{};  // the peer's listener
    socklen_t addr_len = 0;
    // A connection made already (multi_channel::create_cm's rendezvous,
    // which matched the ranks): the peer starts up, with no hello and no
    // tokens; the engine owns the descriptor from start() on.
    int fd = -1;
  };
  // An engine for peers peers that listens for nothing: every TCP peer
  // comes with its connection (peer_setup::fd). Errors: none beyond
  // allocation; a result for listen()'s sake.
  static result<std::unique_ptr<tcp_engine>> make(std::size_t peers, std::shared_ptr<pd_node> pd,
                                                  std::uint32_t send_depth,
                                                  std::uint32_t recv_depth);
  // Listens on address:port (numeric; empty: every interface). Errors:
  // std::errc::invalid_argument (not a numeric address), or the errno.
  static result<std::unique_ptr<tcp_engine>> listen(const std::string &address, std::uint16_t port,
                                                    std::size_t peers, std::shared_ptr<pd_node> pd,
                                                    std::uint32_t send_depth,
                                                    std::uint32_t recv_depth);
  ~tcp_engine();
  tcp_engine(const tcp_engine &) = delete;
  tcp_engine &operator=(const tcp_engine &) = delete;

  // The address and port peers are to connect to.
  void advertise(channel_endpoint &e) const noexcept;
  // How a silent peer (its host gone, no FIN or RST) is noticed, as an RC
  // queue pair notices it: after retry_count + 1 unanswered TCP keepalive
  // probes, one per 4.096 us * 2^ack_timeout (at least 1 s, the socket
  // option's unit) once the connection is idle. Its requests then fail as
  // for a reset (IBV_WC_RETRY_EXC_ERR first). The same span without a TCP
  // acknowledgement of bytes written to it (in flight or still queued: a
  // credit or an answer counts as much as a request) fails it too. Call
  // before start().
  void keep_alive(std::uint8_t ack_timeout, std::uint8_t retry_count) noexcept;
  // Takes the peers and starts the progress thread (connections are made
  // there: the side with the smaller token connects). Errors: the errno of
  // the eventfd or the thread.
  status_code start(std::vector<peer_setup> peers);
  // Queues one request (k_send, k_recv, k_write, k_read of channel_state).
  // Errors: std::errc::not_enough_memory (the peer's ring is full).
  status_code post(std::size_t peer, int kind, const local_slice &buf, const remote_region *r,
                   std::uint64_t wr_id) noexcept;
  // Takes up to out.size() completions; when there are none, waits up to
  // wait for one. Returns how many.
  std::size_t poll(std::span<tcp_completion> out, std::chrono::microseconds wait) noexcept;
  // post(), then poll(out, wait), under one hold of the mutex: what a
  // blocking call does (multi_channel's run_one_slow()), one lock and one
  // call where the two took two. The post's outcome goes to posted (not
  // ok: nothing was polled, 0 returned).
  std::size_t post_poll(std::size_t peer, int kind, const local_slice &buf, const remote_region *r,
                        std::uint64_t wr_id, status_code &posted, std::span<tcp_completion> out,
                        std::chrono::microseconds wait) noexcept;
  // What this side does to a peer that timed out: everything of peer
  // completes with IBV_WC_WR_FLUSH_ERR and its connection is shut.
  void flush(std::size_t peer) noexcept;
  // Why peer failed ("" while it has not).
  std::string failure(std::size_t peer) const;
  // An eventfd that is readable while a peer has failed and take_failure()
  // has not given it yet (multi_channel::cm_fd()); the engine owns it. Call
  // before start(). Errors: the errno of eventfd(2).
  result<int> watch_failures();
  // A peer that failed since the last call, each once (lowest index first),
  // or SIZE_MAX; watch_failures()' fd stays readable while another is left.
  std::size_t take_failure() noexcept;

private:
  // The most frames one sendmsg(2) carries (next_batch()).
  static constexpr std::size_t tcp_out_frames = 32;
  struct op {
    int kind = 0;
    local_slice buf;
    std::uint64_t raddr = 0;
    std::uint32_t rkey = 0;
    std::uint64_t wr_id = 0;
  };
  // An answer this side owes the peer (ack, nack, read response).
  struct answer {
    tcp_frame f;
  };
  enum class state : std::uint8_t { rdma, waiting, connecting, hello, up, dead };
  struct peer {
    state st = state::rdma;
    bool connector = false;
    int fd = -1;
    peer_setup setup;
    fifo<op> sq; // sends, writes, reads: [0, sent) on the wire
    std::size_t sent = 0;
    fifo<op> rq;               // receives
    fifo<answer> answers;      // owed to the peer, in order
    std::size_t responses = 0; // read responses among them (never held: next_batch())
    // Flow control of sends (tcp_frame.hpp): receives the peer has posted
    // and this side has not yet used (below zero: eager sends beyond them),
    // receives posted here that the peer has not yet been told of, and
    // those it was told of and has not used, as far as this side has read
    // (below zero: its eager sends beyond them; see credit_due()).
    std::int64_t credits = 0;
    std::uint32_t credit_owed = 0;
    std::int64_t granted = 0;
    // The peer's eager sends that came before a receive here: their bytes
    // (tcp_eager_sends slots of tcp_eager_max, made by start()) and, oldest
    // first, which slot, wr_id and length; placed by place_staged().
    struct staged_send {
      std::uint64_t wr_id = 0;
      std::uint32_t length = 0;
      std::uint32_t slot = 0;
    };
    std::vector<std::byte> stage;
    fifo<staged_send> staged;
    std::uint32_t stage_next = 0; // the slot the next one goes to (they are used in turn)
    // output: the batch of frames on its way out (next_batch()): out_n
    // headers in out_hdr, each followed by its payload (out_frames), out_len
    // bytes in all, out_off of them sent
    struct out_frame {
      std::uint64_t addr = 0;
      std::uint32_t length = 0; // 0: no payload
      std::uint32_t key = 0;    // its region's key: local for a request, remote for a response
      bool local = true;
    };
    bool out_busy = false;
    bool out_more = false; // the batch stopped at a limit: more may be ready behind it
    std::size_t out_n = 0, out_len = 0, out_off = 0;
    std::array<std::byte, tcp_header_size * tcp_out_frames> out_hdr{};
    std::array<out_frame, tcp_out_frames> out_frames{};
    bool held = false; // a post held its request back (next_batch(), flush_held())
    std::size_t hello_off = 0;
    std::array<std::byte, tcp_hello_size> hello{};
    // input: bytes read ahead ([in_beg, in_end) of inbuf, not yet taken)
    // and the frame on its way in
    std::vector<std::byte> inbuf;
    std::size_t in_beg = 0, in_end = 0;
    // A recv(2) found the socket emptied; none is tried again until poll(2)
    // reports input (note_input()): that saves a recv that would block
    // before each wait, and one per post that reads.
    bool in_drained = false;
    bool in_payload = false;
    tcp_frame in_f;
    std::uint32_t in_done = 0;
    int in_dest = 0;   // where the payload goes (see tcp_engine.cpp)
    int in_status = 0; // the outcome once the payload is in
    bool close_after_output = false;
    bool hung_up = false;     // poll saw POLLHUP/POLLERR (see wanted())
    bool blocking = false;    // its socket is blocking (go_up())
    bool app_reading = false; // a waiting poll() blocks in recv(2) on it (read_blocking())
    bool rdhup = false;       // poll saw the peer's close, or an error (see stage_now())
    bool wrote = false;       // bytes went out since check_acks() last saw all acknowledged
    bool heard = false;       // a read gave bytes (lost(): a peer that closes before any)
    int probe_fd = -1;        // while it owes this side its connection: a probe of its listener
    short polled = 0;         // the events the progress thread sleeps on
    bool unreported = false;  // failed, and take_failure() has not given it yet
    region_table::hint hint;  // the regions its frames used last (region_table.hpp)
    std::string why;          // why it failed
    // A loss found while a thread was in recv(2) on its socket (lost()): its
    // errno (-1: none) and what lost() was told; read_blocking() fails the
    // peer with them once what its recv(2) took is read.
    int lost_err = -1;
    const char *lost_closed = nullptr;
  };
  struct pending_accept {
    int fd = -1;
    std::array<std::byte, tcp_hello_size> buf{};
    std::size_t off = 0;
  };

  // The read-ahead buffer of a TCP peer (pump_in()); a payload at least
  // half its size, once the buffer is empty, goes straight to its place.
  static constexpr std::size_t tcp_read_ahead = 4 * 1024;
  // How many peers (the first ones) a waiting poll() watches itself.
  static constexpr std::size_t app_poll_max = 64;
  // How far beyond what it must cover a waiting application thread sets the
  // progress thread's timer (app_waits()): one timerfd_settime(2) per that
  // much waiting, and the progress thread takes the sockets back at most
  // about that long after the last wait (a one-vCPU VM's 64 B round trip
  // takes about a millisecond: with 1 ms, a setting per message).
  static constexpr std::chrono::milliseconds timer_lead{4};
  tcp_engine() = default;
  // post() and poll() with the mutex held (wake_it: the progress thread is
  // to be woken once it is let go; poll_locked() may let go of it and take
  // it again).
  [[gnu::always_inline]] status_code post_locked(std::size_t peer, int kind, const local_slice &buf,
                                                 const remote_region *r, std::uint64_t wr_id,
                                                 bool &wake_it) noexcept;
  [[gnu::always_inline]] std::size_t poll_locked(std::unique_lock<light_mutex> &lock,
                                                 std::span<tcp_completion> out,
                                                 std::chrono::microseconds wait) noexcept;
  // The ping-pong's own path through post_poll() (tcp_engine.cpp): a
  // receive whose send is read ahead whole, a send to an idle connection,
  // and that send's wait when the engine has the one peer, each taken only
  // from the state its lean_*able() test names and leaving the state the
  // general path would; anything else goes the general way.
  static bool lean_placeable(const peer &q, const local_slice &buf) noexcept;
  void lean_place(peer &q, std::size_t p, const local_slice &buf, std::uint64_t wr_id) noexcept;
  bool lean_sendable(const peer &q, const local_slice &buf) const noexcept;
  void lean_send(peer &q, std::size_t p, const local_slice &buf, std::uint64_t wr_id) noexcept;
  bool lean_waitable(const peer &q, std::chrono::microseconds wait) const noexcept;
  void lean_wait(std::unique_lock<light_mutex> &lock, peer &q, std::size_t p,
                 std::chrono::microseconds wait) noexcept;
  // Whether the progress thread is to be woken after a post to q (see
  // post_locked()); wrote_before: q.wrote before it.
  [[gnu::always_inline]] bool wake_for(peer &q, bool wrote_before) noexcept;
  [[gnu::always_inline]] std::size_t take_done(std::span<tcp_completion> out) noexcept;
  void run() noexcept;
  void check_acks() noexcept; // fails a peer that stopped acknowledging (keep_alive())
  // Fails a peer whose connection poll(2) reported broken when nothing read
  // or wrote it (a send waiting for a credit, answers owed): see tcp_engine.cpp.
  void check_broken(std::size_t p, short revents) noexcept;
  // A peer not up yet: one that cannot be reached is failed (tcp_engine.cpp).
  void probe_waiting(std::size_t p) noexcept;
  void probe_result(std::size_t p) noexcept;
  // Whether run() must wake once per probe interval (check_acks(), probes).
  bool timed_watch() const noexcept;
  void wake() noexcept;
  // A waiting poll() is at work (see run()).
  [[gnu::always_inline]] void app_waits(std::chrono::microseconds for_at_least) noexcept;
  void arm_timer(std::chrono::steady_clock::time_point now, std::chrono::microseconds in) noexcept;
  void step(std::size_t p, short revents) noexcept;
  // step(p, 0) of a peer that is up: what a post and drive() do (inline).
  [[gnu::always_inline]] void step_up(std::size_t p) noexcept;
  // pump_in() and pump_out() until nothing read ahead is ready (step()).
  [[gnu::always_inline]] bool pump(peer &q, std::size_t p) noexcept;
  [[gnu::cold, gnu::noinline]] void refused_sent(std::size_t p) noexcept;
  static bool refusal_out(const peer &q) noexcept;
  static void note_input(peer &q, short revents) noexcept;
  // The connection is made: the peer is up, its socket blocking (for
  // read_blocking(); every other call passes MSG_DONTWAIT); a thread asleep
  // in poll(2) is woken to watch it too.
  void go_up(peer &q) noexcept;
  // Wakes the application threads asleep in poll(2) (app_sleepers_): what
  // they wait for may have come without their sockets telling them.
  [[gnu::cold, gnu::noinline]] void wake_app() noexcept;
  // Before an application thread sleeps up to wait on the sockets: when
  // that sleep is over at the latest (app_sleep_until_, see run()).
  void note_sleep(std::chrono::microseconds wait) noexcept;
  // After it: a timer the progress thread set to that sleep's end is set
  // back to timer_lead from now (a sleep may end long before it).
  void after_sleep() noexcept;
  // A waiting poll() with one peer to watch blocks in recv(2) for its next
  // bytes (read_blocking(): into the read-ahead buffer) or for the rest of
  // a large payload (read_payload_blocking(), when payload_blockable()).
  void read_blocking(std::unique_lock<light_mutex> &lock, std::size_t p) noexcept;
  static bool payload_blockable(const peer &q) noexcept;
  void read_payload_blocking(std::unique_lock<light_mutex> &lock, std::size_t p) noexcept;
  // Before and after such a recv(2): the timer bookkeeping, app_reading;
  // block_end() gives the loss found meanwhile (lost_err; -1: none).
  std::chrono::steady_clock::time_point block_begin(peer &q) noexcept;
  int block_end(peer &q, std::chrono::steady_clock::time_point since) noexcept;
  bool timer_covers(std::chrono::steady_clock::time_point since) const noexcept;
  // Where the payload on its way in goes, and the region check it takes.
  struct payload_place {
    std::uint64_t addr = 0;
    std::uint32_t key = 0;
    region_table::key_kind kind = region_table::key_kind::local;
    rdmadl::access right = rdmadl::access::local;
  };
  static payload_place place_of(const peer &q) noexcept;
  // The peer whose payload a thread is taking in read_payload_blocking()'s
  // recv(2), without the mutex (SIZE_MAX: none; one thread at a time).
  std::atomic<std::size_t> payload_reader_{SIZE_MAX};
  static void region_ended(peer &q) noexcept;
  int read_failed(peer &q, std::size_t p, ssize_t n, int err) noexcept;
  // The connection closed (err 0: closed says how) or failed (err: its
  // errno): the peer fails, and, if it never sent a byte, is told what that
  // suggests. While a thread is in recv(2) on its socket (app_reading), the
  // failure waits for that thread (lost_err): the bytes it is taking came
  // before the close.
  [[gnu::cold, gnu::noinline]] void lost(std::size_t p, int err, const char *closed) noexcept;
  // Whether the send whose header came (in_f) may go to the staging buffer,
  // and whether it is to go there now (tcp_engine.cpp).
  static bool eager_fits(const peer &q) noexcept;
  static bool stage_now(const peer &q) noexcept;
  // (Inline: a post asks it, and a waiting poll() before it sleeps.)
  [[gnu::always_inline]] short wanted(const peer &q) const noexcept;
  // Whether request i of the send queue may go out: not a send without a
  // credit, unless it may go eagerly (tcp_frame.hpp).
  [[gnu::always_inline]] static bool sendable(const peer &q, std::size_t i) noexcept;
  // Whether the credits owed to the peer are to go in a frame of their own
  // (else they wait to ride on the next frame out).
  [[gnu::always_inline]] static bool credit_due(const peer &q) noexcept;
  [[gnu::always_inline]] bool drive() noexcept;
  void drive_step(std::size_t p) noexcept; // (drive())
  [[gnu::always_inline]] static bool idle(const peer &q) noexcept;
  [[gnu::always_inline]] static bool nothing_to_send(const peer &q) noexcept;
  [[gnu::always_inline]] static bool ack_waits(const peer &q) noexcept;
  void accept_new() noexcept;
  void read_hellos() noexcept;
  [[gnu::always_inline]] bool next_batch(peer &q, std::size_t p,
                                         const region_table::reader &regions) noexcept;
  [[gnu::always_inline]] bool holds_back(peer &q) noexcept; // (next_batch())
  void flush_held() noexcept; // sends the requests posts held back (next_batch())
  [[gnu::always_inline]] bool pump_out(peer &q, std::size_t p) noexcept;
  bool send_batches(peer &q, std::size_t p) noexcept; // pump_out()'s work
  static void compact_in(peer &q) noexcept;
  [[gnu::always_inline]] int fill_in(peer &q, std::size_t p, bool &drained) noexcept;
  int read_in(peer &q, std::size_t p, bool &drained) noexcept; // (fill_in())
  bool pump_in(peer &q, std::size_t p) noexcept;
  [[gnu::always_inline]] static bool in_ready(const peer &q) noexcept;
  [[gnu::always_inline]] static void take_header(peer &q, const tcp_frame &f) noexcept;
  [[gnu::always_inline]] bool begin_payload(peer &q, std::size_t p) noexcept;
  [[gnu::always_inline]] bool finish_frame(peer &q, std::size_t p) noexcept;
  void place_staged(peer &q, std::size_t p) noexcept;
  // Answers the request wr_id (a send or write placed) with an ack: the ack
  // at the end of the answers owed, if there is one, takes it into its run
  // (tcp_frame.hpp).
  [[gnu::always_inline]] static void queue_ack(peer &q, std::uint64_t wr_id) noexcept;
  // Answers the peer's send wr_id once a receive took it (status: the
  // receive's; 0: an ack, else a nack, and this side fails after it goes).
  [[gnu::always_inline]] static void answer_send(peer &q, std::uint64_t wr_id, int status) noexcept;
  // (Inline: every request and every receive ends in one.)
  [[gnu::always_inline]] void complete(std::size_t p, std::uint64_t wr_id, int status,
                                       std::uint32_t len) noexcept;
  [[gnu::cold, gnu::noinline]] void grow_done() noexcept;
  void fail(std::size_t p, const std::string &why, int head_status, std::size_t at = 0) noexcept;

  mutable light_mutex m_;
  std::condition_variable_any cv_;
  int cv_waiters_ = 0; // threads in cv_.wait_for() (complete() notifies only then)
  std::vector<peer> peers_;
  std::vector<pending_accept> accepting_;
  fifo<tcp_completion> done_;
  std::shared_ptr<pd_node> pd_;
  int listen_fd_ = -1, wake_fd_ = -1, failure_fd_ = -1;
  int app_wake_fd_ = -1;   // in every application thread's poll(2) (wake_app())
  int app_sleepers_ = 0;   // application threads in that poll(2)
  bool app_woken_ = false; // wake_app() wrote app_wake_fd_ and no one has read it yet
  // The latest end of the sleep an application thread is in (app_polling_
  // > 0: run() keeps the timer from going off before it).
  std::chrono::steady_clock::time_point app_sleep_until_{};
  bool timer_extended_ = false; // run() set the timer to that end (after_sleep())
  int timer_fd_ = -1;           // goes off when no application thread waited for a while (run())
  bool timer_armed_ = false;
  std::chrono::steady_clock::time_point armed_until_{};
  std::chrono::steady_clock::time_point
      last_wait_{}; // app_waits()' clock reading (none: not ticking)
  int family_ = 4;
  std::array<std::uint8_t, 16> addr_{};
  std::uint16_t port_ = 0;
  int probe_secs_ = 1, probes_ = 8; // keep_alive()
  bool sleeping_ = false, stop_ = false;
  bool ticking_ = false;           // the progress thread leaves the sockets to the app (run())
  bool hold_out_ = false;          // an application thread moves bytes (see next_batch())
  bool posting_ = false;           // ... for a post of a request (see next_batch())
  bool held_any_ = false;          // a peer has a request held back (see next_batch())
  bool timed_sleep_ = false;       // run() sleeps with a timeout (timed_watch())
  int app_polling_ = 0;            // application threads inside poll(2) on the sockets
  std::uint64_t app_calls_ = 0;    // how many waiting poll() calls there were (see run())
  std::vector<std::byte> scratch_; // where a refused payload is read to be dropped
  std::thread thread_;
};

} // namespace rdmadl::detail

#endif // RDMADL_SRC_TCP_ENGINE_HPP
