import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { pageOf } from '../contract/common.js';
import {
  TaskPrioritySchema,
  TaskSchema,
  TaskSortSchema,
  type Task,
  type TaskCreate,
  type TaskSort,
} from '../contract/tasks.js';
import { serviceForFile } from './support/app.js';
import { registerUser, type TestUser, userForFile } from './support/users.js';
import { expectProblem } from './support/problems.js';
import { tables } from '../server/db/query.js';
import { walkPages } from './support/pages.js';
import { insertTags } from './support/rows.js';
import { createTask, getTask } from './support/tasks.js';

const TaskPageSchema = pageOf(TaskSchema);
const LIMIT = 7;
const COUNT = 30;
const STATUSES = ['todo', 'in_progress', 'done'] as const;
const PRIORITIES = TaskPrioritySchema.options;
// Lowercase letters only, so every collation orders them as the code points do; repeats make ties.
const WORDS = [
  'kiwi',
  'apple',
  'mango',
  'needles',
  'banana',
  'cherry',
  'date',
  'fig',
  'grape',
  'lemon',
  'apple',
  'zucchini',
];
const DESCRIPTIONS: Record<number, string> = {
  2: 'Spend 100% of the effort',
  3: 'about 1000 units',
  4: 'uses snake_case names',
  5: 'uses snakeXcase names',
  7: 'Find the NEEDLE here',
  8: 'saved under C:\\temp\\files',
};

const service = serviceForFile();
const lister = userForFile(service);
const helper = userForFile(service);
const stranger = userForFile(service);
let zetaTag: string;
let alphaTag: string;
/** The lister's tasks as the server holds them after setup. */
let tasks: Task[];

const at = (base: string, offsetMs: number) => new Date(Date.parse(base) + offsetMs).toISOString();
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

async function createTag(ownerId: string, name: string, color: string): Promise<string> {
  const id = randomUUID();
  await insertTags(service.ctx.db.sql, [{ id, ownerId, name, color }]);
  return id;
}

beforeAll(async () => {
  zetaTag = await createTag(lister.user.id, 'zeta', '#aa0000');
  alphaTag = await createTag(lister.user.id, 'alpha', '#00aa00');

  const ids: string[] = [];
  for (let i = 0; i < COUNT; i++) {
    const tagIds = [...(i % 3 === 0 ? [zetaTag] : []), ...(i % 5 === 0 ? [alphaTag] : [])];
    const task = await createTask(service, lister, {
      title: WORDS[(i * 5) % WORDS.length],
      description: DESCRIPTIONS[i] ?? `task number ${i}`,
      status: STATUSES[i % 3],
      priority: PRIORITIES[(i * 3 + Math.floor(i / 4)) % 4],
      dueAt: i % 6 === 0 ? null : at('2027-01-01T00:00:00.000Z', ((i * 5) % 12) * HOUR),
      assigneeId: i % 4 === 1 ? helper.user.id : null,
      tagIds,
    });
    ids.push(task.id);
    // Timestamps out of id order and with many ties, so the keyset must use the sort key and then the id.
    await service.ctx.db.sql.write(
      tables
        .updateTable('tasks')
        .set({
          created_at: new Date(at('2026-06-01T00:00:00.000Z', Math.floor(((i * 7) % COUNT) / 2) * MINUTE)),
          updated_at: new Date(at('2026-07-01T00:00:00.000Z', Math.floor(((i * 11) % COUNT) / 3) * 1000)),
        })
        .where('id', '=', task.id),
    );
  }
  // Tasks the lister must never see.
  await createTask(service, stranger, { title: 'apple', description: 'NEEDLE 100%' });
  await createTask(service, stranger, { title: 'kiwi', assigneeId: helper.user.id });
  await createTask(service, helper, { title: 'banana' });
  tasks = await Promise.all(ids.map((id) => getTask(service, lister, id)));
});

// ---- the expected order, computed independently of the server ----

type Field = 'createdAt' | 'updatedAt' | 'dueAt' | 'priority' | 'title';
const cmp = (a: string | number, b: string | number) => (a < b ? -1 : a > b ? 1 : 0);

function compareAscending(field: Field, a: Task, b: Task): number {
  let primary: number;
  if (field === 'priority') primary = cmp(PRIORITIES.indexOf(a.priority), PRIORITIES.indexOf(b.priority));
  else if (field === 'dueAt') {
    // Tasks without a due date come last ascending (so first descending).
    if (a.dueAt === null || b.dueAt === null) primary = a.dueAt === b.dueAt ? 0 : a.dueAt === null ? 1 : -1;
    else primary = cmp(Date.parse(a.dueAt), Date.parse(b.dueAt));
  } else if (field === 'title') primary = cmp(a.title, b.title);
  else primary = cmp(Date.parse(a[field]), Date.parse(b[field]));
  return primary || cmp(a.id, b.id);
}

function expectedOrder(sort: TaskSort, items: Task[] = tasks): string[] {
  const descending = sort.startsWith('-');
  const field = TaskSortSchema.parse(sort).replace('-', '');
  const isField = (f: string): f is Field => ['createdAt', 'updatedAt', 'dueAt', 'priority', 'title'].includes(f);
  if (!isField(field)) throw new Error(`unknown sort ${sort}`);
  return [...items].sort((a, b) => (descending ? -1 : 1) * compareAscending(field, a, b)).map((t) => t.id);
}

// ---- paging through a list the way a client would ----

/** GET /tasks as `user` sees it, from the first page to the last by the Link headers. */
async function pageThrough(
  user: TestUser,
  query: string,
  limit = LIMIT,
): Promise<{ items: Task[]; pageSizes: number[] }> {
  const pages = await walkPages(service, user.auth, `/tasks?limit=${limit}${query ? `&${query}` : ''}`, TaskPageSchema);
  return { items: pages.flat(), pageSizes: pages.map((page) => page.length) };
}

const ids = (items: Task[]) => items.map((t) => t.id);

describe('setup', () => {
  it('has varied data: ties, nulls and every status and priority', () => {
    expect(tasks).toHaveLength(COUNT);
    expect(tasks.filter((t) => t.dueAt === null).length).toBeGreaterThan(2);
    expect(new Set(tasks.map((t) => t.createdAt)).size).toBeLessThan(COUNT);
    expect(new Set(tasks.map((t) => t.updatedAt)).size).toBeLessThan(COUNT);
    expect(new Set(tasks.map((t) => t.title)).size).toBeLessThan(COUNT);
    expect(new Set(tasks.map((t) => t.status))).toEqual(new Set(STATUSES));
    expect(new Set(tasks.map((t) => t.priority))).toEqual(new Set(PRIORITIES));
    // createdAt order is not id order, so a keyset on id alone would fail.
    expect(expectedOrder('createdAt')).not.toEqual([...ids(tasks)].sort());
  });

  it('returns each task with its tags ordered by name', () => {
    const both = tasks.filter((t) => t.tags.length === 2);
    expect(both.length).toBeGreaterThan(0);
    for (const task of both) expect(task.tags.map((t) => t.name)).toEqual(['alpha', 'zeta']);
  });
});

describe('sorting with keyset pages', () => {
  it.each(TaskSortSchema.options)('sort=%s pages through every task in order', async (sort) => {
    const { items, pageSizes } = await pageThrough(lister, `sort=${encodeURIComponent(sort)}`);
    expect(ids(items)).toEqual(expectedOrder(sort));
    expect(pageSizes).toEqual([7, 7, 7, 7, 2]);
  });

  it('defaults to -createdAt', async () => {
    const { items } = await pageThrough(lister, '');
    expect(ids(items)).toEqual(expectedOrder('-createdAt'));
  });

  it('puts tasks without a due date last ascending and first descending', async () => {
    const asc = (await pageThrough(lister, 'sort=dueAt')).items;
    const desc = (await pageThrough(lister, 'sort=-dueAt')).items;
    const undated = tasks.filter((t) => t.dueAt === null).length;
    expect(asc.slice(-undated).every((t) => t.dueAt === null)).toBe(true);
    expect(desc.slice(0, undated).every((t) => t.dueAt === null)).toBe(true);
  });

  it('ends a list whose size is a multiple of the limit without an empty page', async () => {
    const { items, pageSizes } = await pageThrough(lister, 'sort=title', 10);
    expect(pageSizes).toEqual([10, 10, 10]);
    expect(ids(items)).toEqual(expectedOrder('title'));
  });

  it('answers one page with no cursor and no Link when everything fits', async () => {
    const res = await service.http.get('/tasks?limit=100').set('Authorization', lister.auth).expect(200);
    const page = TaskPageSchema.parse(res.body);
    expect(page.items).toHaveLength(COUNT);
    expect(page.nextCursor).toBeNull();
    expect(res.headers['link']).toBeUndefined();
  });

  it('accepts limit 1 and 100, and defaults to 20', async () => {
    const one = TaskPageSchema.parse(
      (await service.http.get('/tasks?limit=1').set('Authorization', lister.auth).expect(200)).body,
    );
    expect(one.items).toHaveLength(1);
    expect(one.nextCursor).not.toBeNull();
    const byDefault = TaskPageSchema.parse(
      (await service.http.get('/tasks').set('Authorization', lister.auth).expect(200)).body,
    );
    expect(byDefault.items).toHaveLength(20);
  });
});

describe('filters', () => {
  const dueInstants = () => [...new Set(tasks.flatMap((t) => (t.dueAt ? [t.dueAt] : [])))].sort();
  const updatedInstants = () => [...new Set(tasks.map((t) => t.updatedAt))].sort();

  const cases: [string, () => string, (t: Task) => boolean][] = [
    ['status=todo', () => 'status=todo', (t) => t.status === 'todo'],
    ['status as a set', () => 'status=todo,done', (t) => t.status === 'todo' || t.status === 'done'],
    // Generated OpenAPI clients send arrays as repeated parameters.
    ['status repeated', () => 'status=todo&status=done', (t) => t.status === 'todo' || t.status === 'done'],
    [
      'priority repeated and as a list at once',
      () => 'priority=low&priority=medium,high',
      (t) => t.priority !== 'urgent',
    ],
    ['priority=urgent', () => 'priority=urgent', (t) => t.priority === 'urgent'],
    ['priority as a set', () => 'priority=low,high', (t) => t.priority === 'low' || t.priority === 'high'],
    [
      'status and priority together',
      () => 'status=in_progress,done&priority=medium,urgent',
      (t) => t.status !== 'todo' && ['medium', 'urgent'].includes(t.priority),
    ],
    ['assigneeId', () => `assigneeId=${helper.user.id}`, (t) => t.assigneeId === helper.user.id],
    ['an assigneeId nobody has', () => `assigneeId=${randomUUID()}`, () => false],
    // The boundary is itself a due date of some task: dueBefore excludes it, dueAfter includes it.
    [
      'dueBefore (exclusive)',
      () => `dueBefore=${dueInstants()[4]}`,
      (t) => t.dueAt !== null && t.dueAt < (dueInstants()[4] ?? ''),
    ],
    [
      'dueAfter (inclusive)',
      () => `dueAfter=${dueInstants()[4]}`,
      (t) => t.dueAt !== null && t.dueAt >= (dueInstants()[4] ?? ''),
    ],
    [
      'dueAfter and dueBefore together',
      () => `dueAfter=${dueInstants()[2]}&dueBefore=${dueInstants()[6]}`,
      (t) => t.dueAt !== null && t.dueAt >= (dueInstants()[2] ?? '') && t.dueAt < (dueInstants()[6] ?? ''),
    ],
    [
      'dueAfter with an offset',
      () => `dueAfter=${encodeURIComponent('2027-01-01T07:00:00+02:00')}`,
      (t) => t.dueAt !== null && t.dueAt >= '2027-01-01T05:00:00.000Z',
    ],
    [
      'updatedSince (inclusive)',
      () => `updatedSince=${updatedInstants()[5]}`,
      (t) => t.updatedAt >= (updatedInstants()[5] ?? ''),
    ],
    ['q over titles, case-insensitively', () => 'q=APPLE', (t) => t.title === 'apple'],
    [
      'q over titles and descriptions',
      () => 'q=needle',
      (t) => t.title.includes('needle') || t.description.toLowerCase().includes('needle'),
    ],
    ['q with a literal %', () => `q=${encodeURIComponent('100%')}`, (t) => t.description.includes('100%')],
    ['q with a literal _', () => 'q=snake_case', (t) => t.description.includes('snake_case')],
    ['q with a literal backslash', () => `q=${encodeURIComponent('\\t')}`, (t) => t.description.includes('\\t')],
    ['q with only %', () => `q=${encodeURIComponent('%')}`, (t) => t.description.includes('%')],
    ['q matching nothing', () => 'q=nothing-like-this', () => false],
    ['tagId', () => `tagId=${zetaTag}`, (t) => t.tags.some((g) => g.id === zetaTag)],
    ['tagId as a set (all required)', () => `tagId=${zetaTag},${alphaTag}`, (t) => t.tags.length === 2],
    [
      'q with status and priority',
      () => 'q=a&status=todo&priority=low,medium,high',
      (t) => /a/i.test(t.title + t.description) && t.status === 'todo' && t.priority !== 'urgent',
    ],
  ];

  it.each(cases)('%s', async (_name, query, keep) => {
    const expected = expectedOrder('-createdAt', tasks.filter(keep));
    const { items } = await pageThrough(lister, query());
    expect(ids(items)).toEqual(expected);
  });

  it('finds something for every case that expects something', () => {
    // Guards against a filter test passing only because both sides are empty.
    const empty = cases.filter(
      ([name, , keep]) => !name.includes('nothing') && !name.includes('nobody') && !tasks.some(keep),
    );
    expect(empty.map(([name]) => name)).toEqual([]);
  });

  it('combines a filter with a sort across pages', async () => {
    const keep = (t: Task) => t.status !== 'done';
    const { items } = await pageThrough(lister, 'status=todo,in_progress&sort=-dueAt', 4);
    expect(ids(items)).toEqual(expectedOrder('-dueAt', tasks.filter(keep)));
  });

  it('shows an assignee the tasks assigned to them, filtered', async () => {
    const { items } = await pageThrough(helper, `assigneeId=${helper.user.id}&sort=title`);
    const expected = expectedOrder(
      'title',
      tasks.filter((t) => t.assigneeId === helper.user.id),
    );
    // The stranger's task assigned to the helper is visible to the helper too.
    const strangers = items.filter((t) => t.ownerId === stranger.user.id);
    expect(strangers).toHaveLength(1);
    expect(ids(items.filter((t) => t.ownerId === lister.user.id))).toEqual(expected);
  });
});

describe('stability under concurrent inserts', () => {
  let writer: TestUser;
  let originals: Task[];

  beforeAll(async () => {
    writer = await registerUser(service);
    originals = [];
    for (let i = 0; i < 20; i++)
      originals.push(
        await createTask(service, writer, { title: `${WORDS[i % WORDS.length]}x`, priority: PRIORITIES[i % 4] }),
      );
  });

  async function interleaved(sort: TaskSort, insert: (round: number) => Partial<TaskCreate>): Promise<Task[]> {
    const first = await service.http
      .get(`/tasks?limit=${LIMIT}&sort=${encodeURIComponent(sort)}`)
      .set('Authorization', writer.auth)
      .expect(200);
    let page = TaskPageSchema.parse(first.body);
    const seen = [...page.items];
    for (let round = 0; page.nextCursor; round++) {
      // Between pages, new tasks land before, inside and after the pages still to come.
      for (let k = 0; k < 3; k++) await createTask(service, writer, insert(round * 3 + k));
      const res = await service.http
        .get(`/tasks?limit=${LIMIT}&sort=${encodeURIComponent(sort)}&cursor=${page.nextCursor}`)
        .set('Authorization', writer.auth)
        .expect(200);
      page = TaskPageSchema.parse(res.body);
      seen.push(...page.items);
    }
    return seen;
  }

  it.each<[TaskSort, (n: number) => Partial<TaskCreate>]>([
    ['-createdAt', (n) => ({ title: `new${n}` })],
    ['createdAt', (n) => ({ title: `new${n}` })],
    ['title', (n) => ({ title: WORDS[n % WORDS.length] })],
    ['-priority', (n) => ({ title: `new${n}`, priority: PRIORITIES[n % 4] })],
  ])('sort=%s: every original task appears exactly once', async (sort, insert) => {
    const before = ids(originals);
    const seen = ids(await interleaved(sort, insert));
    for (const id of before) expect(seen.filter((s) => s === id)).toHaveLength(1);
    expect(new Set(seen).size).toBe(seen.length);
    originals = (await pageThrough(writer, '', 100)).items;
  });
});

describe('invalid list requests', () => {
  async function cursorFor(sort: TaskSort): Promise<string> {
    const res = await service.http
      .get(`/tasks?limit=3&sort=${encodeURIComponent(sort)}`)
      .set('Authorization', lister.auth)
      .expect(200);
    const cursor = TaskPageSchema.parse(res.body).nextCursor;
    if (cursor === null) throw new Error('expected a next page');
    return cursor;
  }
  const forged = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

  it.each([
    ['garbage', 'not-a-cursor!'],
    ['base64 of nothing useful', Buffer.from('hello').toString('base64url')],
    ['a JSON cursor of the wrong shape', forged({ foo: 1 })],
    ['a cursor with a bad id', forged({ s: '-createdAt', v: '2026-06-01T00:00:00.000Z', id: 'x' })],
    ['a cursor with a value of the wrong type', forged({ s: '-createdAt', v: 'yesterday', id: randomUUID() })],
  ])('rejects %s as a cursor with 400', async (_name, cursor) => {
    const res = await service.http.get(`/tasks?cursor=${encodeURIComponent(cursor)}`).set('Authorization', lister.auth);
    const problem = expectProblem(res, 400, 'validation_failed');
    expect(problem.errors?.map((e) => e.path)).toContain('query.cursor');
  });

  it.each<[string, TaskSort, string]>([
    ['title', 'title', 'sort=priority'],
    ['-title', '-title', 'sort=title'],
    ['dueAt', 'dueAt', ''],
    ['-createdAt', '-createdAt', 'sort=createdAt'],
  ])('rejects a cursor of sort=%s used with another sort', async (_name, sort, otherQuery) => {
    const cursor = await cursorFor(sort);
    const res = await service.http
      .get(`/tasks?cursor=${cursor}${otherQuery ? `&${otherQuery}` : ''}`)
      .set('Authorization', lister.auth);
    expectProblem(res, 400, 'validation_failed');
  });

  it.each([
    ['priority', { s: 'priority', v: 'enormous', id: randomUUID() }],
    ['dueAt', { s: 'dueAt', v: 12, id: randomUUID() }],
    ['title', { s: 'title', v: null, id: randomUUID() }],
  ])('rejects a forged %s cursor whose value does not fit the sort', async (sort, cursor) => {
    const res = await service.http
      .get(`/tasks?sort=${sort}&cursor=${forged(cursor)}`)
      .set('Authorization', lister.auth);
    expectProblem(res, 400, 'validation_failed');
  });

  it.each(['limit=0', 'limit=101', 'limit=-1', 'limit=abc', 'limit=1.5', 'limit='])(
    'rejects %s with 400',
    async (query) => {
      const res = await service.http.get(`/tasks?${query}`).set('Authorization', lister.auth);
      const problem = expectProblem(res, 400, 'validation_failed');
      expect(problem.errors?.map((e) => e.path)).toContain('query.limit');
    },
  );

  it.each([
    ['an unknown parameter', 'colour=red'],
    ['an unknown sort', 'sort=name'],
    ['a sort with a + prefix', 'sort=%2Btitle'],
    ['an unknown status in a set', 'status=todo,finished'],
    ['an empty status', 'status='],
    ['an unknown priority', 'priority=critical'],
    ['a malformed assigneeId', 'assigneeId=helper'],
    ['a malformed tagId in a set', `tagId=${randomUUID()},nope`],
    ['a malformed dueBefore', 'dueBefore=tomorrow'],
    ['a malformed dueAfter', 'dueAfter=2027-01-01'],
    ['a malformed updatedSince', 'updatedSince=0'],
    ['an empty q', 'q='],
    ['a q with a NUL character', 'q=a%00b'],
    ['a dueBefore beyond year 9999', `dueBefore=${encodeURIComponent('9999-12-31T23:00:00-05:00')}`],
    ['an updatedSince without seconds', 'updatedSince=2026-01-01T10:00Z'],
    ['a repeated single-valued parameter', 'sort=title&sort=-title'],
    ['a repeated status with an unknown value', 'status=todo&status=finished'],
  ])('rejects %s with 400', async (_name, query) => {
    const res = await service.http.get(`/tasks?${query}`).set('Authorization', lister.auth);
    expectProblem(res, 400, 'validation_failed');
  });

  it('answers 401 without a token', async () => {
    expectProblem(await service.http.get('/tasks'), 401, 'unauthenticated');
  });
});
