/**
 * File-system access used by the library, through node:fs (which Bun and Deno both provide).
 * @module
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync, statSync } from "node:fs";

/** True when a file or directory exists at `path`. */
export function pathExists(path: string): boolean {
  return existsSync(path);
}

/** Size in bytes of the file at `path`. */
export function fileSize(path: string): number {
  return statSync(path).size;
}

/** Reads a whole file as UTF-8 text. */
export function readText(path: string): string {
  return readFileSync(path, "utf8");
}

/** Reads a whole file as bytes. */
export function readBytes(path: string): Uint8Array {
  return new Uint8Array(readFileSync(path));
}

/** Writes text, creating parent directories as needed. */
export function writeText(path: string, text: string): void {
  mkdirSync(dirnameOf(path), { recursive: true });
  writeFileSync(path, text);
}

/** Writes bytes, creating parent directories as needed. */
export function writeBytes(path: string, data: Uint8Array): void {
  mkdirSync(dirnameOf(path), { recursive: true });
  writeFileSync(path, data);
}

/** Creates a directory and its parents. */
export function makeDir(path: string): void {
  mkdirSync(path, { recursive: true });
}

function dirnameOf(path: string): string {
  const i = path.lastIndexOf("/");
  return i <= 0 ? "." : path.slice(0, i);
}
