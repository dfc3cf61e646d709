# SPDX-License-Identifier: MIT
# Usage: info-check.py TEXT_FILE JSON_FILE [CHECK...]
# Compares rdmadl-info's text output with its --json output, field by field:
# every library's summary and its bound / emulated / absent counts and names,
# every device's unsigned limits, ports, chosen GID and GID table. The JSON
# must be valid UTF-8. Each CHECK adds an expectation:
#   summary=LIB=REGEX  LIB's summary matches REGEX (fully), and JSON's
#                      "complete" is true exactly when it starts "complete"
#   fake               the fake provider's device (tests/fakes/fake_provider.h)
#   fake-ib            the fake device with an InfiniBand port, LID 7
#   gids=I,J,...       the GID indices listed for fake0 port 1
import json
import re
import socket
import sys


def fail(msg):
    sys.exit("info-check: " + msg)


def parse_text(lines):
    libs, devices = {}, []
    lib = dev = port = None
    for line in lines:
        m = re.match(r"^(lib[^ :]+): (.*)$", line)
        if m:
            lib = libs.setdefault(m.group(1), {"summary": m.group(2)})
            dev = port = None
            continue
        m = re.match(r"^device (.*)$", line)
        if m:
            dev = {"name": m.group(1), "ports": []}
            devices.append(dev)
            lib = port = None
            continue
        if lib is not None:
            m = re.match(r"^  symbols: +(\d+) bound, (\d+) emulated, (\d+) absent$", line)
            if m:
                lib["counts"] = tuple(int(x) for x in m.groups())
            m = re.match(r"^  (emulated|absent|state): +(.*)$", line)
            if m:
                lib[m.group(1)] = m.group(2).split() if m.group(1) != "state" else m.group(2)
            continue
        if dev is None:
            continue
        m = re.search(r"max_mr_size (\d+),", line)
        if m:
            dev["max_mr_size"] = int(m.group(1))
        m = re.match(r"^  node guid: (\S+), sys image guid: (\S+), page_size_cap 0x([0-9a-f]+)$", line)
        if m:
            dev["node_guid"], dev["sys_image_guid"] = m.group(1), m.group(2)
            dev["page_size_cap"] = int(m.group(3), 16)
        m = re.match(r"^  port (\d+): ", line)
        if m:
            port = {"port": int(m.group(1)), "gids": []}
            dev["ports"].append(port)
        m = re.match(r"^    would use GID (\d+) \(", line)
        if m:
            port["would_use_gid"] = int(m.group(1))
        if re.match(r"^    would use GID: none ", line):
            port["would_use_gid"] = None
        m = re.match(r"^    gid +(\d+): (\S+)  (IB|RoCE v1|RoCE v2) +(\S+) +(\S+)$", line)
        if m:
            port["gids"].append({
                "index": int(m.group(1)), "gid": m.group(2), "type": m.group(3),
                "netdev": None if m.group(4) == "-" else m.group(4),
                "address": None if m.group(5) == "-" else m.group(5)})
    return libs, devices


def main():
    text = open(sys.argv[1], "rb").read().decode("utf-8")
    raw = open(sys.argv[2], "rb").read()
    try:
        d = json.loads(raw.decode("utf-8"))  # strict: invalid UTF-8 raises
    except (UnicodeDecodeError, ValueError) as e:
        fail("the JSON is not valid UTF-8 JSON: %s" % e)
    libs, devices = parse_text(text.splitlines())

    if set(libs) != set(d["libraries"]):
        fail("libraries differ: %s vs %s" % (sorted(libs), sorted(d["libraries"])))
    for name, t in libs.items():
        j = d["libraries"][name]
        if "missing" in j or "missing_count" in j:
            fail(name + ": JSON still has a 'missing' count")
        counts = (j["bound"], j["emulated_count"], j["absent_count"])
        if t.get("counts") != counts:
            fail("%s: text counts %s, JSON %s" % (name, t.get("counts"), counts))
        if sum(counts) != j["symbols"]:
            fail("%s: %s do not add up to %d symbols" % (name, counts, j["symbols"]))
        if counts[1] != len(j["emulated"]) or counts[2] != len(j["absent"]):
            fail(name + ": JSON counts disagree with its own lists")
        if t.get("emulated", []) != j["emulated"]:
            fail(name + ": emulated lists differ")
        if "absent" in t and t["absent"] != j["absent"]:
            fail(name + ": absent lists differ")
        if t["summary"] != j["summary"] or t.get("state") != j["state"]:
            fail("%s: text says %r/%r, JSON %r/%r" %
                 (name, t["summary"], t.get("state"), j["summary"], j["state"]))
        if j["complete"] != j["summary"].startswith("complete"):
            fail(name + ": 'complete' disagrees with the summary")

    if [x["name"] for x in devices] != [x["name"] for x in d["devices"]]:
        fail("devices differ")
    for t, j in zip(devices, d["devices"]):
        if "limits" in j:
            lim = j["limits"]
            for k in ("max_mr_size", "page_size_cap"):
                if not isinstance(lim[k], int) or lim[k] < 0 or lim[k] != t.get(k):
                    fail("%s: %s is %r in JSON, %r in text" % (t["name"], k, lim[k], t.get(k)))
            for k in ("node_guid", "sys_image_guid"):
                if j[k] != t.get(k):
                    fail("%s: %s differs" % (t["name"], k))
        if len(t["ports"]) != len(j["ports"]):
            fail(t["name"] + ": ports differ")
        for tp, jp in zip(t["ports"], j["ports"]):
            if tp["port"] != jp["port"] or tp.get("would_use_gid", -1) != jp["would_use_gid"]:
                fail("%s port %d: would use GID %r in text, %r in JSON" %
                     (t["name"], jp["port"], tp.get("would_use_gid", -1), jp["would_use_gid"]))
            jg = [{k: g[k] for k in ("index", "gid", "type", "netdev", "address")}
                  for g in jp["gids"]]
            if tp["gids"] != jg:
                fail("%s port %d: GID tables differ:\n%s\n%s" % (t["name"], jp["port"], tp["gids"], jg))

    for check in sys.argv[3:]:
        if check.startswith("summary="):
            _, lib, rx = check.split("=", 2)
            v = d["libraries"][lib]["summary"]
            if not re.fullmatch(rx, v):
                fail("%s's summary %r does not match %r" % (lib, v, rx))
        elif check == "fake":
            if [x["name"] for x in d["devices"]] != ["fake0"]:
                fail("not the fake device: %s" % [x["name"] for x in d["devices"]])
            dev = d["devices"][0]
            # The fake reports what rxe does: no limit, (uint64_t)-1.
            if dev["limits"]["max_mr_size"] != 2**64 - 1:
                fail("max_mr_size %r" % dev["limits"]["max_mr_size"])
            if dev["limits"]["page_size_cap"] != 4096 or dev["node_guid"] != "0002:c9ff:fe12:3456":
                fail("page_size_cap or node_guid wrong")
            p = dev["ports"][0]
            try:
                ifname = socket.if_indextoname(2)
            except OSError:
                ifname = None
            want = {0: ("RoCE v1", "fe80::202:c9ff:fe12:3456"), 1: ("RoCE v2", "192.0.2.1"),
                    2: ("RoCE v2", "fe80::202:c9ff:fe12:3456")}
            for g in p["gids"]:
                if (g["type"], g["address"]) != want[g["index"]]:
                    fail("GID %d: %s %s" % (g["index"], g["type"], g["address"]))
                if g["ifindex"] != 2 or g["netdev"] != ifname:
                    fail("GID %d: netdev %r, expected %r" % (g["index"], g["netdev"], ifname))
            # context::select_gid's default: the IPv4-mapped RoCE v2 GID.
            if p["would_use_gid"] != 1:
                fail("would use GID %r, expected 1" % p["would_use_gid"])
        elif check == "fake-ib":
            # FAKEPROV_KNOBS=PORT_LINK_LAYER=1,PORT_LID=7: one IB GID, no
            # netdev, no address, and the port GID is the one a QP uses.
            p = d["devices"][0]["ports"][0]
            if (p["link_layer"], p["lid"], p["would_use_gid"]) != ("InfiniBand", 7, 0):
                fail("IB port: %s lid %s would use %s" % (p["link_layer"], p["lid"], p["would_use_gid"]))
            g = [(x["index"], x["type"], x["netdev"], x["address"]) for x in p["gids"]]
            if g != [(0, "IB", None, None)]:
                fail("IB GID table %s" % g)
        elif check.startswith("gids="):
            got = [g["index"] for g in d["devices"][0]["ports"][0]["gids"]]
            want = [int(x) for x in check[5:].split(",")]
            if got != want:
                fail("GID indices %s, expected %s" % (got, want))
        else:
            fail("unknown check " + check)


main()
