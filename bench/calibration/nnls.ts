/**
 * Non-negative least squares: min |A x - b| subject to x >= 0, by Lawson and Hanson's active-set
 * method (Solving Least Squares Problems, 1974, ch. 23). The engine model has a handful of
 * coefficients, each a cost that cannot be negative; a plain least-squares fit would trade a
 * negative cost for a better fit inside the measured range and predict nonsense outside it.
 *
 * The unconstrained sub-problems are solved by Householder QR on the passive columns, which
 * stays accurate when columns are nearly collinear (a fixed cost and a per-sequence cost over
 * points that all have one sequence, say); a column that adds nothing is left at zero.
 * @module
 */

/** The solution and its residual norm |A x - b|. */
export interface NnlsResult {
  x: number[];
  residualNorm: number;
}

/** Solves min |A x - b|, x >= 0; `a` is row-major (m rows of n). */
export function nnls(a: readonly (readonly number[])[], b: readonly number[]): NnlsResult {
  const m = a.length;
  if (m === 0 || b.length !== m) throw new RangeError(`nnls: A has ${m} rows, b has ${b.length} values`);
  const n = a[0]!.length;
  if (n === 0 || a.some((row) => row.length !== n)) {
    throw new RangeError("nnls: A's rows must all have the same, non-zero length");
  }
  if ([...a.flat(), ...b].some((v) => !Number.isFinite(v))) throw new RangeError("nnls: A and b must be finite");
  const scale = Math.max(1e-300, ...a.flat().map(Math.abs));
  const tol = 1e-12 * scale * Math.max(m, n) * Math.max(1, norm(b));
  const x = new Array<number>(n).fill(0);
  const passive = new Array<boolean>(n).fill(false);
  const residual = () => b.map((bi, i) => bi - dot(a[i]!, x));
  const gradient = (r: number[]) =>
    Array.from({ length: n }, (_, j) => a.reduce((s, row, i) => s + row[j]! * r[i]!, 0));
  for (let outer = 0; outer < 3 * n + 10; outer++) {
    const w = gradient(residual());
    let t = -1;
    for (let j = 0; j < n; j++) if (!passive[j] && w[j]! > tol && (t < 0 || w[j]! > w[t]!)) t = j;
    if (t < 0) break;
    passive[t] = true;
    for (let inner = 0; inner < 3 * n + 10; inner++) {
      const s = solvePassive(a, b, passive);
      if (s === null) {
        // The entering column is (numerically) in the span of the others: it cannot help.
        passive[t] = false;
        break;
      }
      const bad = s.findIndex((v, j) => passive[j] && v <= 0);
      if (bad < 0) {
        s.forEach((v, j) => (x[j] = v));
        break;
      }
      // Step from x towards s as far as feasibility allows, and drop the columns that hit zero.
      let alpha = 1;
      for (let j = 0; j < n; j++) {
        if (passive[j] && s[j]! <= 0) alpha = Math.min(alpha, x[j]! / (x[j]! - s[j]!));
      }
      for (let j = 0; j < n; j++) {
        x[j] = x[j]! + alpha * (s[j]! - x[j]!);
        if (passive[j] && x[j]! <= tol) {
          passive[j] = false;
          x[j] = 0;
        }
      }
    }
  }
  return { x, residualNorm: norm(residual()) };
}

/** Least squares over the passive columns (the others held at 0); null when they are rank-deficient. */
function solvePassive(
  a: readonly (readonly number[])[],
  b: readonly number[],
  passive: readonly boolean[],
): number[] | null {
  const cols = passive.flatMap((p, j) => (p ? [j] : []));
  const sub = a.map((row) => cols.map((j) => row[j]!));
  const z = leastSquaresQr(sub, b);
  if (z === null) return null;
  const s = new Array<number>(passive.length).fill(0);
  cols.forEach((j, k) => (s[j] = z[k]!));
  return s;
}

/** min |A z - b| by Householder QR; null when A's columns are (numerically) dependent. */
export function leastSquaresQr(a: readonly (readonly number[])[], b: readonly number[]): number[] | null {
  const m = a.length, n = a[0]?.length ?? 0;
  if (n > m) return null;
  const r = a.map((row) => [...row]);
  const y = [...b];
  const colNorm0 = Array.from({ length: n }, (_, j) => Math.sqrt(r.reduce((s, row) => s + row[j]! ** 2, 0)));
  for (let k = 0; k < n; k++) {
    let nk = 0;
    for (let i = k; i < m; i++) nk += r[i]![k]! ** 2;
    nk = Math.sqrt(nk);
    if (!(nk > 1e-10 * Math.max(colNorm0[k]!, 1e-300))) return null;
    const alpha = r[k]![k]! > 0 ? -nk : nk;
    const v = new Array<number>(m).fill(0);
    for (let i = k; i < m; i++) v[i] = r[i]![k]!;
    v[k] = v[k]! - alpha;
    const vv = v.reduce((s, vi) => s + vi * vi, 0);
    if (vv === 0) continue;
    for (let j = k; j < n; j++) {
      let s = 0;
      for (let i = k; i < m; i++) s += v[i]! * r[i]![j]!;
      const f = (2 * s) / vv;
      for (let i = k; i < m; i++) r[i]![j] = r[i]![j]! - f * v[i]!;
    }
    let s = 0;
    for (let i = k; i < m; i++) s += v[i]! * y[i]!;
    const f = (2 * s) / vv;
    for (let i = k; i < m; i++) y[i] = y[i]! - f * v[i]!;
  }
  const z = new Array<number>(n).fill(0);
  for (let k = n - 1; k >= 0; k--) {
    let s = y[k]!;
    for (let j = k + 1; j < n; j++) s -= r[k]![j]! * z[j]!;
    z[k] = s / r[k]![k]!;
  }
  return z;
}

function dot(u: readonly number[], v: readonly number[]): number {
  let s = 0;
  for (let i = 0; i < u.length; i++) s += u[i]! * v[i]!;
  return s;
}

function norm(v: readonly number[]): number {
  return Math.sqrt(dot(v, v));
}
