// Every page of a keyset-paginated list, fetched one at a time as the caller asks.

export interface Page<T> {
  items: T[];
  nextCursor: string | null;
}

/** Yields the first page, then follows `nextCursor` until the last; stops early when the loop does. */
export async function* pagesOf<T>(
  fetchPage: (cursor: string | undefined) => Promise<Page<T>>,
): AsyncGenerator<Page<T>, void, undefined> {
  let cursor: string | undefined;
  do {
    const page = await fetchPage(cursor);
    yield page;
    cursor = page.nextCursor ?? undefined;
  } while (cursor !== undefined);
}

/** The items of every page, in order. */
export async function* itemsOf<T>(pages: AsyncIterable<Page<T>>): AsyncGenerator<T, void, undefined> {
  for await (const page of pages) yield* page.items;
}
