// SPDX-License-Identifier: MIT
// rdmadl-info: what rdmadl found (libraries, kernel, devices) and why RDMA is
// or is not usable here. See --help.
#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "rdmadl/rdmadl.hpp"

namespace {

constexpr int exit_usable = 0, exit_no_library = 1, exit_no_device = 2, exit_usage = 64,
              exit_io = 74;

const char usage[] =
    "usage: rdmadl-info [--json] [--check] [--help]\n"
    "\n"
    "Prints what rdmadl's loader found: per library its state, the requested and the\n"
    "real path, the highest version node, the missing symbols and the load error;\n"
    "the stack state; and for each RDMA device its GUID, node type, transport,\n"
    "limits, ports (state, MTU, link layer, LID) and GIDs with their types.\n"
    "\n"
    "  --json   print the same as one JSON object\n"
    "  --check  print nothing; only set the exit status\n"
    "  --help   print this text\n"
    "\n"
    "Exit status (the same with and without --check):\n"
    "  0  RDMA is usable: a device opened and has an active port\n"
    "  1  no usable libibverbs: not installed, failed to load, or RDMADL_DISABLE=1\n"
    "  2  libibverbs loaded but no usable device: the kernel has no RDMA support,\n"
    "     no device exists, or no port is active\n"
    " 64  bad command line\n"
    " 74  the output could not be written (a full disk, a closed stdout)\n"
    "\n"
    "Text output escapes control characters in names and paths (\\n, \\t, \\xNN;\n"
    "a backslash as \\\\) and prints - for an empty field.\n"
    "\n"
    "Environment: RDMADL_IBVERBS_PATH, RDMADL_RDMACM_PATH, RDMADL_DISABLE=1,\n"
    "RDMADL_DEBUG=1 (see rdmadl's README).\n";

struct port_info {
  unsigned num;
  rdmadl::port_attr attr;
  std::vector<rdmadl::gid_entry> gids;
};
struct device_info {
  std::string name, error;
  std::uint64_t guid = 0;
  rdmadl::node_type node{};
  rdmadl::transport transport{};
  bool has_attr = false;
  rdmadl::device_attr attr;
  std::vector<port_info> ports;
  std::vector<std::pair<rdmadl::feature, bool>> features;
  rdmadl::provider_info provider;
};

struct report {
  std::vector<rdmadl::library_status> libs;
  rdmadl::stack_state stack{};
  std::vector<device_info> devices;
  std::string devices_error;
  bool usable = false;
  std::string why;
  int status = exit_no_library;
};

std::string guid_str(std::uint64_t g) {
  char b[24];
  std::snprintf(b, sizeof b, "%04x:%04x:%04x:%04x", unsigned(g >> 48) & 0xffff,
                unsigned(g >> 32) & 0xffff, unsigned(g >> 16) & 0xffff, unsigned(g) & 0xffff);
  return b;
}

// One field of the text output: control characters escaped so that no path
// can start a line of its own, "-" when empty.
std::string text(std::string_view s) {
  if (s.empty())
    return "-";
  std::string o;
  for (unsigned char c : s) {
    if (c == '\\') {
      o += "\\\\";
    } else if (c == '\n') {
      o += "\\n";
    } else if (c == '\t') {
      o += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      o += b;
    } else {
      o += static_cast<char>(c);
    }
  }
  return o;
}

report collect() {
  report r;
  // Every library, the lazily loaded ones loaded now: this reports what a
  // program calling them would get.
  for (auto lib : rdmadl::all_libraries) {
    rdmadl::load(lib);
    r.libs.push_back(rdmadl::status(lib));
  }
  r.stack = rdmadl::stack();
  if (r.stack == rdmadl::stack_state::ready) {
    auto list = rdmadl::device_list::get();
    if (!list)
      r.devices_error = list.error().message();
    else
      for (auto d : *list) {
        device_info di;
        di.name = std::string(d.name());
        di.guid = d.guid();
        di.node = d.node();
        di.transport = d.transport_type();
        auto ctx = rdmadl::context::open(d);
        if (!ctx) {
          di.error = "cannot open: " + ctx.error().message();
          r.devices.push_back(std::move(di));
          continue;
        }
        if (auto a = ctx->query_device()) {
          di.has_attr = true;
          di.attr = *a;
        } else {
          di.error = "query_device: " + a.error().message();
        }
        for (unsigned p = 1; di.has_attr && p <= di.attr.phys_port_cnt; p++) {
          port_info pi{p, {}, {}};
          if (auto pa = ctx->query_port(static_cast<std::uint8_t>(p)))
            pi.attr = *pa;
          if (auto g = ctx->gid_table(static_cast<std::uint8_t>(p)))
            pi.gids = std::move(*g);
          if (pi.attr.state == rdmadl::port_state::active)
            r.usable = true;
          di.ports.push_back(std::move(pi));
        }
        for (auto f : rdmadl::all_features)
          di.features.emplace_back(f, ctx->supports(f));
        di.provider = ctx->provider();
        r.devices.push_back(std::move(di));
      }
  }
  // The loader's verdict: the same sentence rdmadl_verdict() gives any program.
  auto d = rdmadl::diagnose();
  r.stack = d.state; // (one reading: the stack line agrees with the verdict)
  r.usable = d.usable;
  r.why = std::string(d.sentence);
  r.status =
      d.usable ? exit_usable
      : (d.state == rdmadl::stack_state::disabled || d.state == rdmadl::stack_state::no_library)
          ? exit_no_library
          : exit_no_device;
  return r;
}

void print_text(const report &r) {
  std::printf("rdmadl-info %d.%d.%d\n", RDMADL_VERSION_MAJOR, RDMADL_VERSION_MINOR,
              RDMADL_VERSION_PATCH);
  for (std::size_t i = 0; i < r.libs.size(); i++) {
    const auto &l = r.libs[i];
    auto so = rdmadl::soname(rdmadl::all_libraries[i]);
    std::printf("%s: %s\n", text(so.substr(0, so.find(".so"))).c_str(), text(l.state_name).c_str());
    std::printf("  requested:    %s\n", text(l.requested).c_str());
    std::printf("  path:         %s\n", text(l.path).c_str());
    std::printf("  version node: %s\n", text(l.version_node).c_str());
    // Resolved, emulated (a fallback runs) and missing (EOPNOTSUPP) apart.
    std::printf("  symbols:      %zu bound, %zu emulated, %zu missing\n",
                l.symbol_count - l.missing.size(), l.emulated.size(),
                l.missing.size() - l.emulated.size());
    if (!l.emulated.empty()) {
      std::printf("  emulated:    ");
      for (auto m : l.emulated)
        std::printf(" %s", text(m).c_str());
      std::printf("\n");
    }
    if (l.missing.size() > l.emulated.size() && l.missing.size() < l.symbol_count) {
      std::printf("  missing:     ");
      for (auto m : l.missing)
        if (std::find(l.emulated.begin(), l.emulated.end(), m) == l.emulated.end())
          std::printf(" %s", text(m).c_str());
      std::printf("\n");
    }
    std::printf("  error:        %s\n", text(l.error).c_str());
  }
  auto sn = rdmadl::name(r.stack);
  std::printf("stack: %s\n", text(sn).c_str());
  // (The verdict comes escaped from the loader.)
  std::printf("usable: %s: %s\n", r.status == exit_usable ? "yes" : "no", r.why.c_str());
  for (const auto &d : r.devices) {
    auto nn = rdmadl::name(d.node), tn = rdmadl::name(d.transport);
    std::printf("device %s\n  guid:      %s\n  node type: %s\n  transport: %s\n",
                text(d.name).c_str(), guid_str(d.guid).c_str(), text(nn).c_str(), text(tn).c_str());
    if (!d.error.empty())
      std::printf("  error:     %s\n", text(d.error).c_str());
    if (d.has_attr) {
      const auto &a = d.attr;
      auto an = rdmadl::name(a.atomic);
      std::printf("  firmware:  %s\n  vendor:    0x%x part %u hw %u\n", text(a.fw_ver).c_str(),
                  a.vendor_id, a.vendor_part_id, a.hw_ver);
      std::printf("  limits:    max_qp %d, max_qp_wr %d, max_cq %d, max_cqe %d, max_mr %d, "
                  "max_mr_size %" PRIu64 ", max_pd %d, max_sge %d, max_sge_rd %d,\n"
                  "             max_qp_rd_atom %d, max_qp_init_rd_atom %d, max_srq %d, "
                  "max_srq_wr %d, max_ah %d, atomic %.*s\n",
                  a.max_qp, a.max_qp_wr, a.max_cq, a.max_cqe, a.max_mr, a.max_mr_size, a.max_pd,
                  a.max_sge, a.max_sge_rd, a.max_qp_rd_atom, a.max_qp_init_rd_atom, a.max_srq,
                  a.max_srq_wr, a.max_ah, int(an.size()), an.data());
    }
    if (!d.provider.name.empty())
      std::printf("  provider:  %s (%s), direct verbs: %s\n", text(d.provider.name).c_str(),
                  text(d.provider.file).c_str(),
                  !d.provider.direct_verbs ? "none"
                  : d.provider.direct_verbs_usable
                      ? std::string(rdmadl::soname(*d.provider.direct_verbs)).c_str()
                      : "unusable");
    std::printf("  features: ");
    for (auto [f, yes] : d.features) {
      auto fn = rdmadl::name(f);
      std::printf(" %.*s=%s", int(fn.size()), fn.data(), yes ? "yes" : "no");
    }
    std::printf("\n");
    for (const auto &p : d.ports) {
      auto st = rdmadl::name(p.attr.state), ll = rdmadl::name(p.attr.link);
      std::printf("  port %u: %.*s, mtu %u (max %u), link layer %.*s, lid %u\n", p.num,
                  int(st.size()), st.data(), p.attr.active_mtu, p.attr.max_mtu, int(ll.size()),
                  ll.data(), p.attr.lid);
      for (const auto &g : p.gids) {
        auto gt = rdmadl::name(g.type);
        std::printf("    gid %3u: %s  %.*s\n", g.index, g.value.to_string().c_str(), int(gt.size()),
                    gt.data());
      }
    }
  }
}

std::string json_str(std::string_view s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += static_cast<char>(c);
    } else if (c < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      o += b;
    } else {
      o += static_cast<char>(c);
    }
  }
  return o + "\"";
}

void print_json(const report &r) {
  std::string o = "{\n  \"version\": \"" + std::to_string(RDMADL_VERSION_MAJOR) + "." +
                  std::to_string(RDMADL_VERSION_MINOR) + "." +
                  std::to_string(RDMADL_VERSION_PATCH) + "\",\n  \"libraries\": {";
  for (std::size_t i = 0; i < r.libs.size(); i++) {
    const auto &l = r.libs[i];
    auto opt = [](std::string_view s) { return s.empty() ? std::string("null") : json_str(s); };
    auto so = rdmadl::soname(rdmadl::all_libraries[i]);
    o += std::string(i ? "," : "") + "\n    " + json_str(so.substr(0, so.find(".so"))) +
         ": {\"soname\": " + json_str(so) + ", \"state\": " + json_str(l.state_name) +
         ", \"requested\": " + opt(l.requested) + ", \"path\": " + opt(l.path) +
         ", \"version_node\": " + opt(l.version_node) + ", \"error\": " + opt(l.error) +
         ", \"symbols\": " + std::to_string(l.symbol_count) +
         ", \"missing_count\": " + std::to_string(l.missing.size()) + ", \"missing\": [";
    for (std::size_t k = 0; k < l.missing.size(); k++)
      o += (k ? ", " : "") + json_str(l.missing[k]);
    o += "], \"emulated\": [";
    for (std::size_t k = 0; k < l.emulated.size(); k++)
      o += (k ? ", " : "") + json_str(l.emulated[k]);
    o += "]}";
  }
  o += "\n  },\n  \"stack\": " + json_str(rdmadl::name(r.stack)) +
       ",\n  \"usable\": " + (r.status == exit_usable ? "true" : "false") +
       ",\n  \"reason\": " + json_str(r.why) + ",\n  \"exit_status\": " + std::to_string(r.status) +
       ",\n  \"devices\": [";
  for (std::size_t i = 0; i < r.devices.size(); i++) {
    const auto &d = r.devices[i];
    o += std::string(i ? "," : "") + "\n    {\"name\": " + json_str(d.name) +
         ", \"guid\": " + json_str(guid_str(d.guid)) +
         ", \"node_type\": " + json_str(rdmadl::name(d.node)) +
         ", \"transport\": " + json_str(rdmadl::name(d.transport));
    if (!d.error.empty())
      o += ", \"error\": " + json_str(d.error);
    if (d.has_attr) {
      const auto &a = d.attr;
      auto n = [](const char *k, long long v) {
        return std::string(", \"") + k + "\": " + std::to_string(v);
      };
      o += ", \"fw_ver\": " + json_str(a.fw_ver) +
           ", \"limits\": {\"atomic_cap\": " + json_str(rdmadl::name(a.atomic));
      o += n("max_qp", a.max_qp) + n("max_qp_wr", a.max_qp_wr) + n("max_cq", a.max_cq) +
           n("max_cqe", a.max_cqe) + n("max_mr", a.max_mr) +
           n("max_mr_size", static_cast<long long>(a.max_mr_size)) + n("max_pd", a.max_pd) +
           n("max_sge", a.max_sge) + n("max_sge_rd", a.max_sge_rd) +
           n("max_qp_rd_atom", a.max_qp_rd_atom) + n("max_qp_init_rd_atom", a.max_qp_init_rd_atom) +
           n("max_srq", a.max_srq) + n("max_srq_wr", a.max_srq_wr) + n("max_ah", a.max_ah) +
           n("phys_port_cnt", a.phys_port_cnt) + "}";
    }
    if (!d.provider.name.empty())
      o += ", \"provider\": {\"name\": " + json_str(d.provider.name) +
           ", \"file\": " + json_str(d.provider.file) + ", \"direct_verbs\": " +
           (d.provider.direct_verbs ? json_str(rdmadl::soname(*d.provider.direct_verbs))
                                    : std::string("null")) +
           ", \"direct_verbs_usable\": " + (d.provider.direct_verbs_usable ? "true" : "false") +
           "}";
    o += ", \"features\": {";
    for (std::size_t k = 0; k < d.features.size(); k++)
      o += (k ? ", " : "") + json_str(rdmadl::name(d.features[k].first)) + ": " +
           (d.features[k].second ? "true" : "false");
    o += "}, \"ports\": [";
    for (std::size_t k = 0; k < d.ports.size(); k++) {
      const auto &p = d.ports[k];
      o += std::string(k ? ", " : "") + "{\"port\": " + std::to_string(p.num) +
           ", \"state\": " + json_str(rdmadl::name(p.attr.state)) +
           ", \"active_mtu\": " + std::to_string(p.attr.active_mtu) +
           ", \"max_mtu\": " + std::to_string(p.attr.max_mtu) +
           ", \"link_layer\": " + json_str(rdmadl::name(p.attr.link)) +
           ", \"lid\": " + std::to_string(p.attr.lid) + ", \"gids\": [";
      for (std::size_t g = 0; g < p.gids.size(); g++)
        o += std::string(g ? ", " : "") + "{\"index\": " + std::to_string(p.gids[g].index) +
             ", \"gid\": " + json_str(p.gids[g].value.to_string()) +
             ", \"type\": " + json_str(rdmadl::name(p.gids[g].type)) + "}";
      o += "]}";
    }
    o += "]}";
  }
  o += "\n  ]\n}\n";
  std::fputs(o.c_str(), stdout);
}

// Whether everything printed reached stdout; says why not on stderr.
bool flushed() {
  errno = 0;
  if (std::fflush(stdout) == 0 && !std::ferror(stdout))
    return true;
  std::fprintf(stderr, "rdmadl-info: cannot write the output: %s\n",
               errno ? std::strerror(errno) : "write error");
  return false;
}

} // namespace

int main(int argc, char **argv) {
  bool json = false, check = false;
  for (int i = 1; i < argc; i++) {
    if (!std::strcmp(argv[i], "--json")) {
      json = true;
    } else if (!std::strcmp(argv[i], "--check")) {
      check = true;
    } else if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      std::fputs(usage, stdout);
      return flushed() ? 0 : exit_io;
    } else {
      std::fprintf(stderr, "rdmadl-info: unknown option '%s'\n%s", argv[i], usage);
      return exit_usage;
    }
  }
  report r = collect();
  if (check)
    return r.status;
  if (json)
    print_json(r);
  else
    print_text(r);
  return flushed() ? r.status : exit_io;
}
