/**
 * Records serialized once per version. A read route's body is the stored JSON of its rows joined,
 * instead of each row being decoded, rebuilt, checked against its schema and serialized again on
 * every request (for GET /v1/profiles that was most of a request: the rows' JSON columns parsed,
 * the record's schema check hashing `tools` for uniqueItems, 7 KB stringified).
 *
 * The version must change whenever the record would (profiles: `updated_at`, which every update
 * raises strictly in the same statement), so a stale entry is never served: an entry is used only
 * when the row read now has the version it was made from. The database stays the truth; this
 * only saves the work of turning a row into its JSON. Bounded: the oldest entry goes first.
 */
export class VersionedJson {
  private entries = new Map<string, { version: number; json: string }>();

  constructor(private readonly max = 2_000) {}

  /** The JSON of record `id` at `version`, made by `make` when not stored (null: the record is gone). */
  get(id: string, version: number, make: () => { version: number; json: string } | null): string | null {
    const hit = this.entries.get(id);
    if (hit && hit.version === version) return hit.json;
    const made = make();
    if (hit) this.entries.delete(id);
    if (!made) return null;
    if (this.entries.size >= this.max) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(id, made);
    return made.json;
  }

  /** The stored JSON of record `id` when it is at `version`, else undefined. */
  peek(id: string, version: number): string | undefined {
    const hit = this.entries.get(id);
    return hit && hit.version === version ? hit.json : undefined;
  }

  drop(id: string): void {
    this.entries.delete(id);
  }

  get size(): number {
    return this.entries.size;
  }
}
