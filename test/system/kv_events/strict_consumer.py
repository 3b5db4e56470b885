#!/usr/bin/env python3
"""A strict, independent KV-event consumer: Debian's python3-zmq and python3-msgpack only.

Written from the wire format as llm-d decodes it (llm-d/llm-d-router at commit ebab687:
pkg/kvevents/engineadapter/vllm_adapter.go and common.go for the payload, pkg/kvevents/
zmq_subscriber.go for frames and replay), not from LMPool's encoder. It subscribes to one or more
streams, rebuilds each stream's block set from the events, and fails (exit 3, one JSON line naming
the batch and the rule) on anything llm-d would refuse or that breaks the stream's promises: a
batch that is not an array of exactly three fields, a topic not of the expected kv@<pod>@<model>
form, a BlockStored that is not whole blocks of the configured size, a parent not announced before
its child, a block stored twice or removed unannounced, a data_parallel_rank other than the
stream's, a gap in the sequence that replay does not fill.

Usage: strict_consumer.py '<json config>'; config: {"streams": [{"name", "endpoint", "replay",
"rank"}], "topic_filter", "pod", "model", "block_size", "state_file"}. With a state file from an
earlier run it resumes: replays from one past the last sequence number it applied. Commands on
stdin, one per line: `dump name=seq ...` waits until each stream applied that batch and prints the
block sets as one JSON line; `save` writes the state file and exits; `exit` exits.
"""
import json
import os
import sys

import msgpack
import zmq

END_SEQ = 0xFFFFFFFFFFFFFFFF
U64 = (1 << 64) - 1
STORED_FIELDS = ["block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium",
                 "lora_name", "extra_keys", "group_idx", "kv_cache_spec_kind", "kv_cache_spec_sliding_window"]
REMOVED_FIELDS = ["block_hashes", "medium", "group_idx"]


class Violation(Exception):
    pass


def parse_topic(topic):
    parts = topic.split("@")
    return (parts[1], parts[2]) if len(parts) == 3 else (topic, "")


def as_hash(v, where):
    if isinstance(v, bool):
        raise Violation(f"{where}: a hash is an integer or bytes, got a bool")
    if isinstance(v, int):
        if v > U64 or v < -(1 << 63):
            raise Violation(f"{where}: {v} does not fit 64 bits")
        return v & U64
    if isinstance(v, (bytes, bytearray)):
        if not v:
            raise Violation(f"{where}: an empty byte hash")
        return int.from_bytes(bytes(v[-8:]).rjust(8, b"\0"), "big")
    raise Violation(f"{where}: a hash is an integer or bytes, got {type(v).__name__}")


def as_int(v, where):
    if isinstance(v, bool) or not isinstance(v, int):
        raise Violation(f"{where} is not an integer: {v!r}")
    return v


def optional_str(v, where):
    if v is not None and not isinstance(v, str):
        raise Violation(f"{where} is not a string: {v!r}")
    return v


def decode_event(raw, where):
    if isinstance(raw, dict):
        tag = raw.get("type")
        if not isinstance(tag, str):
            raise Violation(f"{where}: map-encoded event without a string type")
        order = STORED_FIELDS if tag == "BlockStored" else REMOVED_FIELDS if tag == "BlockRemoved" else []
        fields = [tag] + [raw.get(k) for k in order]
    elif isinstance(raw, list):
        fields = raw
    else:
        raise Violation(f"{where}: event is neither an array nor a map")
    if not fields or not isinstance(fields[0], str):
        raise Violation(f"{where}: event without a string tag")
    at = lambda i: fields[i] if i < len(fields) else None  # noqa: E731
    tag = fields[0]
    where = f"{where} ({tag})"
    if tag == "BlockStored":
        if len(fields) < 5:
            raise Violation(f"{where}: needs at least 5 fields, got {len(fields)}")
        if not isinstance(fields[1], list):
            raise Violation(f"{where}: block_hashes is not an array")
        if not isinstance(fields[3], list):
            raise Violation(f"{where}: token_ids is not an array")
        extra = at(8)
        if extra is not None and (not isinstance(extra, list) or any(k is not None and not isinstance(k, list) for k in extra)):
            raise Violation(f"{where}: extra_keys is not an array of arrays or nils")
        group = None if at(9) is None else as_int(at(9), f"{where} group_idx")
        if group is not None and group < 0:
            raise Violation(f"{where}: group_idx is negative")
        return {
            "type": tag,
            "hashes": [as_hash(h, f"{where} block_hashes[{i}]") for i, h in enumerate(fields[1])],
            "parent": None if fields[2] is None else as_hash(fields[2], f"{where} parent_block_hash"),
            "tokens": [as_int(t, f"{where} token_ids[{i}]") for i, t in enumerate(fields[3])],
            "block_size": as_int(fields[4], f"{where} block_size"),
            "lora_id": None if at(5) is None else as_int(at(5), f"{where} lora_id"),
            "medium": optional_str(at(6), f"{where} medium"),
            "lora_name": optional_str(at(7), f"{where} lora_name"),
            "extra_keys": extra,
        }
    if tag == "BlockRemoved":
        if len(fields) < 2 or not isinstance(fields[1], list):
            raise Violation(f"{where}: needs block_hashes")
        group = None if at(3) is None else as_int(at(3), f"{where} group_idx")
        if group is not None and group < 0:
            raise Violation(f"{where}: group_idx is negative")
        return {"type": tag, "hashes": [as_hash(h, f"{where} block_hashes[{i}]") for i, h in enumerate(fields[1])],
                "medium": optional_str(at(2), f"{where} medium")}
    if tag == "AllBlocksCleared":
        return {"type": tag}
    raise Violation(f"{where}: unknown event tag")


class Stream:
    def __init__(self, ctx, poller, spec, cfg, state):
        self.name = spec["name"]
        self.rank = spec["rank"]
        self.cfg = cfg
        self.blocks = {int(h, 16): t for h, t in state.get("blocks", {}).items()}
        self.next = state.get("last_seq", -1) + 1
        self.counts = {"BlockStored": 0, "BlockRemoved": 0, "AllBlocksCleared": 0}
        self.replays = 0
        self.replaying = False
        self.waiting = []
        self.resumed = "last_seq" in state
        self.sub = ctx.socket(zmq.SUB)
        self.sub.setsockopt(zmq.LINGER, 0)
        self.sub.connect(spec["endpoint"])
        self.sub.setsockopt_string(zmq.SUBSCRIBE, cfg.get("topic_filter", ""))
        poller.register(self.sub, zmq.POLLIN)
        self.dealer = None
        if spec.get("replay"):
            self.dealer = ctx.socket(zmq.DEALER)
            self.dealer.setsockopt(zmq.LINGER, 0)
            self.dealer.connect(spec["replay"])
            poller.register(self.dealer, zmq.POLLIN)
            self.ask_replay()
        elif self.resumed:
            raise Violation(f"stream {self.name}: resuming needs a replay endpoint")

    def ask_replay(self):
        self.replaying = True
        self.replays += 1
        self.replay_expected = self.next
        self.dealer.send_multipart([b"", self.next.to_bytes(8, "big")])

    def check_topic(self, topic):
        pod, model = parse_topic(topic)
        if "pod" in self.cfg and (pod, model) != (self.cfg["pod"], self.cfg["model"]):
            raise Violation(f"stream {self.name}: topic {topic!r} parses as pod {pod!r} model {model!r}")

    def on_live(self, frames):
        if len(frames) != 3 or len(frames[1]) < 8:
            raise Violation(f"stream {self.name}: a live message of {len(frames)} frames")
        topic, seq, payload = frames[0].decode(), int.from_bytes(frames[1][:8], "big"), frames[2]
        if self.replaying:
            self.waiting.append((topic, seq, payload))
            return
        self.live(topic, seq, payload)

    def live(self, topic, seq, payload):
        if seq < self.next:
            return
        if seq > self.next:
            if self.dealer is None:
                raise Violation(f"stream {self.name}: gap before batch {seq} (wanted {self.next}) and no replay")
            self.waiting.append((topic, seq, payload))
            self.ask_replay()
            return
        self.apply(topic, seq, payload)

    def on_replay(self, frames):
        if frames and len(frames[0]) == 0:
            frames = frames[1:]
        if len(frames) != 3:
            raise Violation(f"stream {self.name}: a replay reply of {len(frames)} frames (llm-d reads topic, seq, payload)")
        if len(frames[2]) == 0:
            if int.from_bytes(frames[1], "big") != END_SEQ:
                raise Violation(f"stream {self.name}: a replay end marker whose seq is not -1")
            self.replaying = False
            waiting, self.waiting = sorted(self.waiting, key=lambda w: w[1]), []
            for w in waiting:
                if self.replaying:
                    self.waiting.append(w)
                else:
                    self.live(*w)
            return
        seq = int.from_bytes(frames[1][:8], "big")
        if seq < self.next:
            return
        if seq != self.next:
            raise Violation(f"stream {self.name}: replay sent batch {seq}, wanted {self.next}: a gap")
        self.apply(frames[0].decode(), seq, frames[2])

    def apply(self, topic, seq, payload):
        self.check_topic(topic)
        where = f"stream {self.name} batch {seq}"
        try:
            batch = msgpack.unpackb(payload, raw=False, strict_map_key=False)
        except Exception as e:  # noqa: BLE001
            raise Violation(f"{where}: not msgpack: {e}")
        if not isinstance(batch, list) or len(batch) != 3:
            raise Violation(f"{where}: the batch must be an array of exactly 3 fields")
        ts, events, rank = batch
        if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not isinstance(events, list):
            raise Violation(f"{where}: ts must be a number and events an array")
        if rank != self.rank:
            raise Violation(f"{where}: data_parallel_rank {rank!r}, expected {self.rank}")
        decoded = [decode_event(e, f"{where} event {i}") for i, e in enumerate(events)]
        bs = self.cfg["block_size"]
        for i, e in enumerate(decoded):
            at = f"{where} event {i} ({e['type']})"
            self.counts[e["type"]] += 1
            if e["type"] == "AllBlocksCleared":
                self.blocks.clear()
                continue
            if e["medium"] != "GPU":
                raise Violation(f"{at}: medium {e['medium']!r}")
            if e["type"] == "BlockRemoved":
                for h in e["hashes"]:
                    if self.blocks.pop(h, None) is None:
                        raise Violation(f"{at}: removes {h:016x}, which is not stored")
                continue
            n = len(e["hashes"])
            if e["block_size"] != bs or n == 0 or len(e["tokens"]) != bs * n:
                raise Violation(f"{at}: {len(e['tokens'])} tokens for {n} blocks of {e['block_size']} (want full blocks of {bs})")
            if e["extra_keys"] is not None and len(e["extra_keys"]) != n:
                raise Violation(f"{at}: extra_keys has {len(e['extra_keys'])} entries for {n} blocks")
            if e["parent"] is not None and e["parent"] not in self.blocks:
                raise Violation(f"{at}: parent {e['parent']:016x} was not announced before its child")
            for j, h in enumerate(e["hashes"]):
                if h in self.blocks:
                    raise Violation(f"{at}: stores {h:016x} twice")
                self.blocks[h] = e["tokens"][j * bs:(j + 1) * bs]
        self.next = seq + 1

    def report(self):
        return {"last_seq": self.next - 1, "blocks": sorted(f"{h:016x}" for h in self.blocks), "counts": self.counts,
                "replays": self.replays}

    def state(self):
        return {"last_seq": self.next - 1, "blocks": {f"{h:016x}": t for h, t in self.blocks.items()}}


def main():
    cfg = json.loads(sys.argv[1])
    state = {}
    if cfg.get("state_file") and os.path.exists(cfg["state_file"]):
        with open(cfg["state_file"]) as f:
            state = json.load(f)
    ctx = zmq.Context()
    poller = zmq.Poller()
    streams = [Stream(ctx, poller, s, cfg, state.get(s["name"], {})) for s in cfg["streams"]]
    poller.register(sys.stdin.fileno(), zmq.POLLIN)
    print(json.dumps({"ready": True}), flush=True)
    waits = None
    pending = ""
    while True:
        for sock, _ in poller.poll(20):
            if sock == sys.stdin.fileno():
                data = os.read(sys.stdin.fileno(), 65536).decode()
                if not data:
                    return 0
                pending += data
                while "\n" in pending:
                    line, pending = pending.split("\n", 1)
                    cmd = line.split()
                    if not cmd:
                        continue
                    if cmd[0] == "exit":
                        return 0
                    if cmd[0] == "save":
                        with open(cfg["state_file"], "w") as f:
                            json.dump({s.name: s.state() for s in streams}, f)
                        print(json.dumps({"saved": True}), flush=True)
                        return 0
                    if cmd[0] == "dump":
                        waits = {k: int(v) for k, v in (a.split("=") for a in cmd[1:])}
                continue
            for s in streams:
                if sock is s.sub:
                    while s.sub.poll(0):
                        s.on_live(s.sub.recv_multipart())
                elif sock is s.dealer:
                    while s.dealer.poll(0):
                        s.on_replay(s.dealer.recv_multipart())
        if waits is not None and all(s.next - 1 >= waits.get(s.name, -1) and not s.replaying for s in streams):
            print(json.dumps({"streams": {s.name: s.report() for s in streams}}), flush=True)
            waits = None


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Violation as v:
        print(json.dumps({"error": str(v)}), flush=True)
        sys.exit(3)
