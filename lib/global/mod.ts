/**
 * `lmpool/routing`: the routing policies' names and weights, the NVLink topology, and the block
 * hashes routing matches prefixes by.
 * @module
 */
export { DEFAULT_ROUTING_CONFIG, POLICY_NAMES, resolveRoutingConfig } from "./routing_config.ts";
export type { PolicyName, RoutingConfig, RoutingConfigInput } from "./routing_config.ts";
export { NvlinkTopology, parseNvidiaSmiTopo } from "./topology.ts";
export type { RankPair } from "./topology.ts";
export { blockHash, prefixBlockHashes, rootHash } from "../core/block_hash.ts";
export type { BlockHash } from "../core/block_hash.ts";
