/**
 * Where a KV-event stream's sockets go, by vLLM's rules (vllm/distributed/kv_events.py, commit
 * 0181ea3, ZmqEventPublisher._socket_setup and offset_endpoint_port): the PUB endpoint binds when it
 * has `*` or `::` or is an ipc:// or inproc:// address, and connects otherwise (llm-d's scheduler
 * may bind one socket that every pod connects to); the replay ROUTER always binds. In per-rank mode
 * rank r's endpoints are offset as vLLM offsets a data-parallel rank's: a tcp port by r, an inproc
 * name by the suffix `_dp<r>`. vLLM refuses an ipc:// endpoint for ranks above 0; LMPool suffixes it
 * like inproc (ours).
 * @module
 */

/** True when the PUB socket binds `endpoint` rather than connecting to it. */
export function bindsEndpoint(endpoint: string): boolean {
  return endpoint.includes("*") || endpoint.includes("::") || endpoint.startsWith("ipc://") ||
    endpoint.startsWith("inproc://");
}

/** `endpoint` for data-parallel rank `rank` (unchanged for rank 0). */
export function offsetEndpoint(endpoint: string, rank: number): string {
  if (!Number.isInteger(rank) || rank < 0) throw new RangeError(`rank must be an integer >= 0, got ${rank}`);
  if (rank === 0) return endpoint;
  if (endpoint.startsWith("inproc://") || endpoint.startsWith("ipc://")) return `${endpoint}_dp${rank}`;
  const colon = endpoint.lastIndexOf(":");
  const port = Number(endpoint.slice(colon + 1));
  if (!endpoint.startsWith("tcp://") || colon < "tcp://".length || !Number.isInteger(port) || port < 1) {
    throw new RangeError(
      `per-rank KV events offset the endpoint's port by the rank, so ${JSON.stringify(endpoint)} needs a numeric port`,
    );
  }
  if (port + rank > 65535) throw new RangeError(`${endpoint} offset by rank ${rank} is past port 65535`);
  return `${endpoint.slice(0, colon)}:${port + rank}`;
}
