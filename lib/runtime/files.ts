/**
 * File-system access used by the library, through node:fs (which Bun and Deno both provide).
 * @module
 */
import { appendFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";

/** True when a file or directory exists at `path`. */
export function pathExists(path: string): boolean {
  return existsSync(path);
}

/** Reads a whole file as UTF-8 text. */
export function readText(path: string): string {
  return readFileSync(path, "utf8");
}

/** Writes text, creating parent directories as needed. */
export function writeText(path: string, text: string): void {
  mkdirSync(dirnameOf(path), { recursive: true });
  writeFileSync(path, text);
}

/** Appends text to a file, creating it (not its directories) when missing. */
export function appendText(path: string, text: string): void {
  appendFileSync(path, text);
}

/** Creates a directory and its parents. */
export function makeDir(path: string): void {
  mkdirSync(path, { recursive: true });
}

function dirnameOf(path: string): string {
  const i = path.lastIndexOf("/");
  return i <= 0 ? "." : path.slice(0, i);
}
