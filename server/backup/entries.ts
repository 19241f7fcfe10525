import { createHash } from 'node:crypto';
import { STORAGE_KEY } from '../storage/storage.js';
import {
  attachmentEntry,
  BackupError,
  MANIFEST_ENTRY,
  manifestLimit,
  parseManifest,
  readArchive,
  tableEntry,
  type EntryHeader,
  type Manifest,
} from './archive.js';

// A restore trusts nothing in an archive: every entry must be one the manifest lists, once, in the
// order the dump writes them (the tables, the attachments by key, the manifest last), with the
// size and sha256 (and for tables the row count) that the manifest gives it.

const NEWLINE = 0x0a;
const TABLE_ENTRY = /^tables\/([a-z_][a-z0-9_]{0,62})\.copy$/;
const ATTACHMENT_ENTRY = /^attachments\/(.+)$/;
const MAX_TABLE_ENTRIES = 1_000;

const crafted = (what: string) => new BackupError(`The archive ${what}: it is damaged or crafted`);
const tooLarge = (bytes: number) =>
  new BackupError(`The archive's manifest is larger than its entries need (${bytes} bytes): it is damaged or crafted`);

type Kind = { kind: 'table'; table: string } | { kind: 'attachment'; key: string } | { kind: 'manifest' };

function classify({ name, type }: EntryHeader): Kind {
  const table = TABLE_ENTRY.exec(name)?.[1];
  const key = ATTACHMENT_ENTRY.exec(name)?.[1];
  if (type !== 'file') throw crafted(`holds an unexpected entry ${name} (${type})`);
  if (name === MANIFEST_ENTRY) return { kind: 'manifest' };
  if (table) return { kind: 'table', table };
  if (key && STORAGE_KEY.test(key)) return { kind: 'attachment', key };
  throw crafted(`holds an unexpected entry ${name.slice(0, 200)}`);
}

export interface EntryDigest {
  bytes: number;
  sha256: string;
  /** Newlines: a table entry's rows. */
  rows: number;
}

/** Reads an entry's bytes through, counting and hashing them. */
export async function digestOf(content: AsyncIterable<Buffer>): Promise<EntryDigest> {
  const hash = createHash('sha256');
  let bytes = 0;
  let rows = 0;
  for await (const chunk of content) {
    hash.update(chunk);
    bytes += chunk.length;
    for (let i = chunk.indexOf(NEWLINE); i !== -1; i = chunk.indexOf(NEWLINE, i + 1)) rows++;
  }
  return { bytes, sha256: hash.digest('hex'), rows };
}

const tableLine = (table: Manifest['tables'][number]) =>
  `${tableEntry(table.name)}\0${table.bytes}\0${table.rows}\0${table.sha256}\n`;
const attachmentLine = (a: Manifest['attachments'][number]) => `${attachmentEntry(a.key)}\0${a.size}\0${a.sha256}\n`;

/** What the entries of an archive must be, in order, by its manifest; checked entry by entry. */
export class ExpectedEntries {
  private position = 0;
  private readonly tableIndex: Map<string, number>;

  constructor(private readonly manifest: Manifest) {
    this.tableIndex = new Map(manifest.tables.map((t, i) => [tableEntry(t.name), i]));
  }

  private get total(): number {
    return this.manifest.tables.length + this.manifest.attachments.length;
  }

  private nameAt(index: number): string | undefined {
    const tables = this.manifest.tables.length;
    const table = this.manifest.tables[index];
    if (table) return tableEntry(table.name);
    const attachment = this.manifest.attachments[index - tables];
    return attachment ? attachmentEntry(attachment.key) : undefined;
  }

  /** Where the manifest places an entry: tables by name, attachments by key (they are in ascending order). */
  private indexOf(name: string): number | undefined {
    const table = this.tableIndex.get(name);
    if (table !== undefined) return table;
    const key = ATTACHMENT_ENTRY.exec(name)?.[1];
    const list = this.manifest.attachments;
    if (key === undefined) return undefined;
    for (let low = 0, high = list.length - 1; low <= high;) {
      const middle = (low + high) >> 1;
      const at = list[middle]?.key ?? '';
      if (at === key) return this.manifest.tables.length + middle;
      if (at < key) low = middle + 1;
      else high = middle - 1;
    }
    return undefined;
  }

  /** The next entry, which must be the one the manifest has next; its table or attachment. */
  next(
    header: EntryHeader,
  ):
    | { kind: 'table'; table: Manifest['tables'][number] }
    | { kind: 'attachment'; attachment: Manifest['attachments'][number] }
    | { kind: 'manifest' } {
    const kind = classify(header);
    const wanted = this.nameAt(this.position);
    if (kind.kind === 'manifest') {
      if (this.position > this.total) throw crafted(`holds ${header.name} twice`);
      if (wanted !== undefined) throw crafted(`lacks ${wanted}`);
      this.position = this.total + 1;
      return kind;
    }
    if (header.name !== wanted) {
      const at = this.indexOf(header.name);
      if (this.position > this.total) throw crafted(`holds ${header.name} after its manifest`);
      if (at === undefined) throw crafted(`holds ${header.name}, which its manifest does not list`);
      if (at < this.position) throw crafted(`holds ${header.name} twice`);
      throw crafted(`lacks ${wanted}`);
    }
    const index = this.position++;
    const table = this.manifest.tables[index];
    if (table) return { kind: 'table', table };
    const attachment = this.manifest.attachments[index - this.manifest.tables.length];
    if (!attachment) throw crafted(`holds ${header.name}, which its manifest does not list`);
    return { kind: 'attachment', attachment };
  }

  /** After the last entry: every listed entry came, and the manifest. */
  finish(): void {
    const wanted = this.nameAt(this.position);
    if (wanted !== undefined) throw crafted(`lacks ${wanted}`);
    if (this.position <= this.total) throw crafted('has no manifest');
  }
}

export function checkTable(table: Manifest['tables'][number], found: EntryDigest): void {
  if (found.bytes !== table.bytes || found.sha256 !== table.sha256)
    throw new BackupError(
      `The rows of table ${table.name} in the archive do not match their sha256 in the manifest: the archive is damaged`,
    );
  if (found.rows !== table.rows)
    throw new BackupError(
      `Table ${table.name} holds ${found.rows} rows in the archive where its manifest says ${table.rows}: the archive is damaged`,
    );
}

export function checkAttachment(attachment: Manifest['attachments'][number], found: { bytes: number; sha256: string }) {
  if (found.bytes !== attachment.size || found.sha256 !== attachment.sha256)
    throw new BackupError(
      `The bytes of attachment ${attachment.key} in the archive do not match their sha256 in the manifest: the archive is damaged`,
    );
}

export interface CheckedArchive {
  manifest: Manifest;
  /** sha256 of the manifest's text: names the archive (an unfinished restore is finished only with it). */
  manifestSha256: string;
}

/**
 * Reads the whole archive once, in memory bounded whatever it holds, and checks every entry
 * against the manifest: names, order, sizes, rows and sha256. Entries are folded into one digest
 * as they come (the manifest is last); when it differs from the manifest's, a second reading
 * names the first entry at fault.
 */
export async function checkArchive(file: string, stop?: AbortSignal): Promise<CheckedArchive> {
  const folded = createHash('sha256');
  const tables = new Set<string>();
  let attachments = 0;
  let lastKey = '';
  let inOrder = true;
  let manifestText: string | undefined;
  await readArchive(
    file,
    async (header, content) => {
      const kind = classify(header);
      if (manifestText !== undefined) throw crafted(`holds ${header.name} after its manifest`);
      if (kind.kind === 'manifest') {
        const limit = manifestLimit(tables.size, attachments);
        if (header.size > limit) throw tooLarge(header.size);
        const chunks: Buffer[] = [];
        let size = 0;
        for await (const chunk of content) {
          size += chunk.length;
          if (size > limit) throw tooLarge(size);
          chunks.push(chunk);
        }
        manifestText = Buffer.concat(chunks).toString('utf8');
        return;
      }
      if (kind.kind === 'table') {
        if (tables.has(kind.table)) throw crafted(`holds ${header.name} twice`);
        if (tables.size >= MAX_TABLE_ENTRIES) throw crafted(`holds more than ${MAX_TABLE_ENTRIES} tables`);
        tables.add(kind.table);
        const found = await digestOf(content);
        folded.update(`${header.name}\0${found.bytes}\0${found.rows}\0${found.sha256}\n`);
        return;
      }
      if (kind.key === lastKey) throw crafted(`holds ${header.name} twice`);
      if (kind.key < lastKey) inOrder = false;
      lastKey = kind.key;
      attachments++;
      const found = await digestOf(content);
      folded.update(`${header.name}\0${found.bytes}\0${found.sha256}\n`);
    },
    stop,
  );
  if (manifestText === undefined)
    throw new BackupError(`${file} has no manifest: it is cut short, or not a backup of this service`);
  const manifest = parseManifest(manifestText);
  const expected = createHash('sha256');
  for (const table of manifest.tables) expected.update(tableLine(table));
  for (const attachment of manifest.attachments) expected.update(attachmentLine(attachment));
  if (!inOrder || expected.digest('hex') !== folded.digest('hex')) await nameTheFault(file, manifest, stop);
  return { manifest, manifestSha256: createHash('sha256').update(manifestText).digest('hex') };
}

/** Reads the archive again against its manifest, failing at the first entry that differs from it. */
async function nameTheFault(file: string, manifest: Manifest, stop?: AbortSignal): Promise<never> {
  const expected = new ExpectedEntries(manifest);
  await readArchive(
    file,
    async (header, content) => {
      const entry = expected.next(header);
      if (entry.kind === 'table') checkTable(entry.table, await digestOf(content));
      else if (entry.kind === 'attachment') checkAttachment(entry.attachment, await digestOf(content));
    },
    stop,
  );
  expected.finish();
  throw crafted('does not match its manifest');
}
