const FALLBACK_TYPE = 'application/octet-stream';
/** type/subtype as RFC 6838 §4.2 allows them (restricted-name). */
const MEDIA_TYPE = /^[a-z0-9][a-z0-9!#$&^_.+-]{0,126}\/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}$/;

/** The bytes decide when they are recognisable; else the declared type if well-formed; else octet-stream. */
export async function contentTypeOf(head: Buffer, declared: string | undefined): Promise<string> {
  // file-type (some thirty modules) is loaded at the first upload, not at start.
  const detected =
    head.length > 0
      ? await import('file-type').then(({ fileTypeFromBuffer }) => fileTypeFromBuffer(head)).catch(() => undefined)
      : undefined;
  if (detected) return detected.mime;
  const normalized = declared?.trim().toLowerCase();
  return normalized && MEDIA_TYPE.test(normalized) ? normalized : FALLBACK_TYPE;
}
