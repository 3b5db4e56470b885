/** Test helpers: bf16 conversion (the library's own, matching csrc/common/bf16.h) and a seeded rng. */
export { bf16ToF32, f32ToBf16 } from "../../lib/model/float_formats.ts";
export { seededRandom as rng } from "../../lib/core/seeded_random.ts";
