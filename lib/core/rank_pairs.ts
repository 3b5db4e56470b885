/**
 * The one parser of NVLink pair lists such as "0-1,2-3", shared by the `--nvlink-pairs` flag, the
 * LMPOOL_NVLINK_PAIRS setting and `NvlinkTopology.fromPairs`.
 * @module
 */

/** An unordered pair of ranks (NvlinkTopology stores it with a < b). */
export type RankPair = readonly [number, number];

/**
 * Parses "0-1,2-3" into [[0, 1], [2, 3]] (blanks around entries allowed; empty text: no pairs).
 * `source` names the flag or setting in the RangeError a bad entry raises.
 */
export function parseRankPairs(text: string, source: string): RankPair[] {
  const pairs: RankPair[] = [];
  for (const part of text.split(",").map((s) => s.trim()).filter(Boolean)) {
    const m = /^(\d+)\s*-\s*(\d+)$/.exec(part);
    if (!m) {
      throw new RangeError(
        `${source} entries must look like 0-1 (two different GPUs), got ${JSON.stringify(part)} in ${
          JSON.stringify(text)
        }`,
      );
    }
    if (m[1] === m[2]) throw new RangeError(`${source} pairs GPU ${m[1]} with itself in ${JSON.stringify(text)}`);
    pairs.push([Number(m[1]), Number(m[2])]);
  }
  return pairs;
}
