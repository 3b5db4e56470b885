// The CUDA IPC path's ready/done signals over the workers' real KV peer channels (Unix sockets):
// they reach the other side's handler intact (errors included) and never the host path's mailbox,
// which keeps working for payloads of the same plan id; and two IpcDataPaths over these channels
// (fake mappings) complete a plan in each direction.
import { afterEach, expect, test } from "bun:test";
import { IpcDataPath } from "../../../../../lib/transfer/paths/ipc/ipc_data_path.ts";
import { type IpcSignal, ipcSignalsOverChannel } from "../../../../../lib/transfer/paths/ipc/ipc_signals.ts";
import { KvPeerChannel } from "../../../../../lib/transfer/paths/host/kv_peer_channel.ts";
import { tempSocketPath } from "../../../../../lib/runtime/unix_socket.ts";
import { type FakeMemory, FakeView } from "./fake_ipc.ts";

const open: KvPeerChannel[] = [];
afterEach(async () => {
  for (const c of open.splice(0)) await c.close();
});

async function channels(): Promise<[KvPeerChannel, KvPeerChannel]> {
  const paths = [tempSocketPath("ia"), tempSocketPath("ib")];
  const chans = await Promise.all(
    [0, 1].map((rank) =>
      KvPeerChannel.listen({ rank, socketPath: paths[rank]!, peerSocketPath: (r) => paths[r]!, log: () => {} })
    ),
  );
  open.push(...chans);
  return [chans[0]!, chans[1]!];
}

test("signals arrive intact at the handler and bypass the mailbox; payloads of the same plan id still work", async () => {
  const [a, b] = await channels();
  const got: string[] = [];
  const lineB = ipcSignalsOverChannel(b);
  lineB.listen((from, s: IpcSignal) =>
    got.push(`${from} ${JSON.stringify(s, (_k, v: unknown) => (v instanceof Int32Array ? [...v] : v))}`)
  );
  const lineA = ipcSignalsOverChannel(a);
  lineA.listen(() => {});
  await lineA.send(1, { kind: "ready", planId: "c1-7", dstBlocks: Int32Array.from([5, 0, 4096, 2 ** 31 - 1]) });
  await lineA.send(1, { kind: "done", planId: "c1-7" });
  await lineA.send(1, { kind: "done", planId: "c1-8", error: "not copied: the plan was cancelled (déjà vu)" });
  await a.send("c1-7", 1, new Uint8Array([1, 2, 3]));
  expect(await b.receive("c1-7", 0)).toEqual(new Uint8Array([1, 2, 3]));
  for (let i = 0; i < 100 && got.length < 3; i++) await new Promise((r) => setTimeout(r, 5));
  expect(got).toEqual([
    `0 {"kind":"ready","planId":"c1-7","dstBlocks":[5,0,4096,2147483647]}`,
    `0 {"kind":"done","planId":"c1-7"}`,
    `0 {"kind":"done","planId":"c1-8","error":"not copied: the plan was cancelled (déjà vu)"}`,
  ]);
  expect(() => b.divert("\u0000ipc-ready", () => {})).toThrow(/already diverted/);
});

test("two IPC data paths over real channels move a plan each way", async () => {
  const [a, b] = await channels();
  const mem: FakeMemory[] = [0, 1].map((r) => new Map(Array.from({ length: 4 }, (_, i) => [i, `${r}:${i}`])));
  const views = [new FakeView(4, mem[0]!, mem[1]!), new FakeView(4, mem[1]!, mem[0]!)];
  const paths = [a, b].map((ch, rank) =>
    new IpcDataPath({
      rank,
      blockBytes: 10,
      views: new Map([[1 - rank, views[rank]!]]),
      signals: ipcSignalsOverChannel(ch),
      timeoutMs: 2000,
      log: () => {},
    })
  );
  const job = (planId: string, peerRank: number) => ({
    planId,
    peerRank,
    srcBlocks: Int32Array.from([1, 2]),
    dstBlocks: Int32Array.from([3, 0]),
  });
  expect(
    await Promise.all([
      paths[0]!.send(job("p1", 1)),
      paths[1]!.receive(job("p1", 0)),
      paths[1]!.send(job("p2", 0)),
      paths[0]!.receive(job("p2", 1)),
    ]),
  ).toEqual([20, 20, 20, 20]);
  expect([mem[1]!.get(3), mem[1]!.get(0), mem[0]!.get(3), mem[0]!.get(0)]).toEqual(["0:1", "0:2", "1:1", "1:2"]);
  for (const p of paths) await p.close();
});
