// libzmq through FFI and one stream's publisher, without an engine: frames cross PUB/SUB and
// ROUTER/DEALER intact (a payload of 1 MiB too), a taken port is a typed error, a handle used after
// dispose throws; the replay socket answers from its bounded buffer in llm-d's frame form and ends
// with the -1 marker, and a subscriber that joins late catches up through it without a gap.
import { afterAll, describe, expect, test } from "bun:test";
import { ZmqError } from "../../../ffi/zmq/zmq_errors.ts";
import { ZmqContext } from "../../../ffi/zmq/zmq_socket.ts";
import { END_OF_REPLAY_SEQ, seqFrame, ZmqEventPublisher } from "../../../lib/kv_events/zmq_event_publisher.ts";
import { KvEventSubscriber, type ReceivedBatch } from "../../../lib/kv_events/subscriber/kv_event_subscriber.ts";
import { KvEventPublishers } from "../../../lib/kv_events/kv_event_publishers.ts";
import { KvEventService } from "../../../lib/kv_events/kv_event_service.ts";
import { parseKvEventsConfig } from "../../../lib/kv_events/kv_events_config.ts";
import { prefixBlockHashes, rootHash } from "../../../lib/core/block_hash.ts";
import { libzmqMissing, unavailableSuite } from "../../helpers/system_libraries.ts";

/** Polls `f` until it returns a value (or fails after `ms`). */
async function eventually<T>(f: () => T | null | undefined, ms = 5000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = f();
    if (v !== null && v !== undefined) return v;
    if (Date.now() > end) throw new Error("timed out");
    await Bun.sleep(5);
  }
}

const missing = libzmqMissing();
if (missing) unavailableSuite("libzmq sockets and the event publisher", missing);
else {
  describe("libzmq sockets and the event publisher", () => {
    const ctx = new ZmqContext();
    afterAll(() => ctx.dispose());

    test("frames cross PUB/SUB and ROUTER/DEALER intact; errors are typed", async () => {
      const pub = ctx.socket("PUB");
      pub.bind("tcp://127.0.0.1:*");
      const sub = ctx.socket("SUB");
      sub.connect(pub.lastEndpoint());
      sub.subscribe("kv@");
      const big = new Uint8Array(1 << 20).map((_, i) => i & 0xff);
      const got = await eventually(() => {
        pub.send([new TextEncoder().encode("kv@p@m"), seqFrame(7n), big]);
        pub.send([new TextEncoder().encode("other"), seqFrame(8n), big]); // filtered out by the subscription
        return sub.receive();
      });
      expect(new TextDecoder().decode(got[0])).toBe("kv@p@m");
      expect(got[1]).toEqual(seqFrame(7n));
      expect(got[2]).toEqual(big);

      const router = ctx.socket("ROUTER");
      router.bind("tcp://127.0.0.1:*");
      const dealer = ctx.socket("DEALER");
      dealer.connect(router.lastEndpoint());
      await eventually(() => dealer.send([new Uint8Array(0), seqFrame(3n)]) || null);
      const req = await eventually(() => router.receive());
      expect(req.length).toBe(3);
      router.send([req[0]!, new Uint8Array(0), new Uint8Array([1, 2])]);
      expect(await eventually(() => dealer.receive())).toEqual([new Uint8Array(0), new Uint8Array([1, 2])]);

      const taken = ctx.socket("PUB");
      expect(() => taken.bind(pub.lastEndpoint())).toThrow(ZmqError);
      try {
        taken.bind(pub.lastEndpoint());
      } catch (e) {
        expect((e as ZmqError).code).toBe("EADDRINUSE");
      }
      taken.dispose();
      taken.dispose();
      expect(() => taken.bind("tcp://127.0.0.1:*")).toThrow(/after dispose/);
      for (const s of [pub, sub, router, dealer]) s.dispose();
    });

    test("replay answers from the bounded buffer; a late subscriber catches up without a gap", async () => {
      const p = new ZmqEventPublisher(ctx, {
        endpoint: "tcp://127.0.0.1:*",
        replayEndpoint: "tcp://127.0.0.1:*",
        topic: "kv@pod@model",
        hwm: 1000,
        bufferSteps: 4,
      });
      for (let i = 0; i < 6; i++) p.publish(new Uint8Array([i]));
      const timer = setInterval(() => p.serviceReplay(), 5);
      try {
        // A raw replay request: batches 2..5 (4 kept), then the end marker, each with the topic frame.
        const dealer = ctx.socket("DEALER");
        dealer.connect(p.boundReplayEndpoint!);
        await eventually(() => dealer.send([new Uint8Array(0), seqFrame(0n)]) || null);
        const replies: Uint8Array[][] = [];
        await eventually(() => {
          for (let m = dealer.receive(); m; m = dealer.receive()) replies.push(m);
          return replies.length === 5 ? true : null;
        });
        expect(replies.map((r) => r.length)).toEqual([4, 4, 4, 4, 4]);
        expect(replies.map((r) => new DataView(r[2]!.buffer, r[2]!.byteOffset, 8).getBigUint64(0))).toEqual([
          2n,
          3n,
          4n,
          5n,
          END_OF_REPLAY_SEQ,
        ]);
        expect(replies[4]![3]!.length).toBe(0);
        dealer.dispose();

        // A subscriber that resumes after batch 3: it replays 4 and 5, then reads live ones in order.
        const seen: ReceivedBatch[] = [];
        const sub = new KvEventSubscriber(ctx, {
          endpoint: p.boundEndpoint.replace("0.0.0.0", "127.0.0.1"),
          replayEndpoint: p.boundReplayEndpoint!.replace("0.0.0.0", "127.0.0.1"),
          topicFilter: "kv@",
          startSeq: 4n,
          onBatch: (b) => seen.push(b),
        });
        await eventually(() => (sub.poll(), !sub.replaying && seen.length >= 2 ? true : null));
        // Live ones keep coming until the SUB connection is up; every batch arrives once, in order.
        await eventually(() => {
          p.publish(new Uint8Array([9]));
          sub.poll();
          return seen.length >= 5 ? true : null;
        });
        expect(seen.map((b) => b.seq)).toEqual(seen.map((_, i) => 4n + BigInt(i)));
        expect(seen[0]!.topic).toBe("kv@pod@model");
        sub.dispose();
      } finally {
        clearInterval(timer);
        p.dispose();
      }
    });

    test("per-rank publishers take vLLM's offsets; a socket that fails costs a batch, not the server", () => {
      const publishers = KvEventPublishers.open(
        parseKvEventsConfig({
          enable_kv_cache_events: true,
          endpoint: "inproc://kv-rank",
          replay_endpoint: "inproc://kv-rank-replay",
          granularity: "rank",
        }),
        2,
      );
      expect(publishers.describe().map((d) => [d.stream, d.endpoint, d.replayEndpoint])).toEqual([
        [0, "inproc://kv-rank", "inproc://kv-rank-replay"],
        [1, "inproc://kv-rank_dp1", "inproc://kv-rank-replay_dp1"],
      ]);
      const lines: string[] = [];
      const service = new KvEventService(publishers, { blockSize: 4, log: (l) => lines.push(l) });
      const tokens = [1, 2, 3, 4, 5, 6, 7, 8];
      const hashes = prefixBlockHashes(tokens, 4);
      service.requestStarted("r", tokens, undefined, hashes);
      publishers.streams[1]!.publisher.dispose(); // rank 1's socket is gone
      for (const rank of [0, 1]) {
        service.onPageTableChange({
          type: "page_table_change",
          rank,
          epoch: 1,
          full: false,
          hashes,
          parents: [rootHash(), hashes[0]!],
          removed: [],
        });
      }
      expect(service.flush()).toBe(1);
      expect(service.stats()).toMatchObject({ batches: 1, publishErrors: 1 });
      expect(lines.length).toBe(1);
      service.close();
    });
  });
}
