// Every event payload the service writes, held against the contract: each write path that records
// events (most build their payload in SQL, beside the change) is walked once, and each event it wrote
// must carry exactly what the API answers for that object right after the write. A payload builder
// that drifts from the contract fails here, not in a reader in production (which would skip it).
import { beforeAll, describe, expect, it } from 'vitest';
import { EVENT_TYPES, type Event } from '../contract/events.js';
import { AttachmentSchema } from '../contract/attachments.js';
import { CommentSchema } from '../contract/comments.js';
import { pageOf } from '../contract/common.js';
import { MemberSchema, ProjectSchema } from '../contract/projects.js';
import { TagSchema } from '../contract/tags.js';
import { TaskSchema, type Task } from '../contract/tasks.js';
import { UserSchema } from '../contract/users.js';
import { serviceForFile } from './support/app.js';
import { readAllChanges } from './support/events.js';
import { samplesOf, valueOf } from './support/metrics.js';
import { type TestUser, userForFile } from './support/users.js';

const service = serviceForFile();
let cursor: string;
const alice = userForFile(service);
const bob = userForFile(service);
const admin = userForFile(service, { admin: true });
beforeAll(async () => {
  cursor = (await readAllChanges(service, admin)).cursor;
});

const as = (user: TestUser) => ({ Authorization: user.auth });
const getTask = async (id: string) =>
  TaskSchema.parse((await service.http.get(`/tasks/${id}`).set(as(alice)).expect(200)).body);
const getTag = async (id: string) =>
  TagSchema.parse((await service.http.get(`/tags/${id}`).set(as(alice)).expect(200)).body);
// An event carries no caller's role (it goes to every member): null, as an outsider sees it.
const getProject = async (id: string) => ({
  ...ProjectSchema.parse((await service.http.get(`/projects/${id}`).set(as(alice)).expect(200)).body),
  role: null,
});
const getMember = async (projectId: string, userId: string) => {
  const page = pageOf(MemberSchema).parse(
    (await service.http.get(`/projects/${projectId}/members?limit=100`).set(as(alice)).expect(200)).body,
  );
  return page.items.find((member) => member.userId === userId);
};
const getUser = async (id: string) =>
  UserSchema.parse((await service.http.get(`/users/${id}`).set(as(admin)).expect(200)).body);

/** The events the last step wrote, as an admin reads them in the changes feed. */
async function eventsOfStep(): Promise<Event[]> {
  const page = await readAllChanges(service, admin, cursor);
  cursor = page.cursor;
  return page.events;
}

/** Each task as the API showed it after the step before: what a `task.updated`'s `previous` is held against. */
const shownBefore = new Map<string, Task>();

/** The fields of `before` whose value `after` changed, as they were: never version or updatedAt. */
function changedFields(before: Task, after: Task): Partial<Task> {
  return Object.fromEntries(
    Object.entries(before).filter(
      ([field, value]) =>
        field !== 'version' &&
        field !== 'updatedAt' &&
        JSON.stringify(value) !== JSON.stringify(Object.entries(after).find(([name]) => name === field)?.[1]),
    ),
  );
}

/** What the API answers now for the object each event is about, in the event's own shape. */
async function asTheApiShowsIt(event: Event): Promise<Event['data']> {
  switch (event.type) {
    case 'task.created':
      return { task: await getTask(event.data.task.id) };
    case 'task.updated': {
      const task = await getTask(event.data.task.id);
      const before = shownBefore.get(task.id);
      return { task, previous: before ? changedFields(before, task) : {} };
    }
    case 'comment.created':
    case 'comment.updated':
      return {
        comment: CommentSchema.parse(
          (await service.http.get(`/comments/${event.data.comment.id}`).set(as(alice)).expect(200)).body,
        ),
      };
    case 'tag.created':
    case 'tag.updated':
      return { tag: await getTag(event.data.tag.id) };
    case 'attachment.created':
      return {
        attachment: AttachmentSchema.parse(
          (await service.http.get(`/attachments/${event.data.attachment.id}`).set(as(alice)).expect(200)).body,
        ),
      };
    case 'user.updated':
      return { user: await getUser(event.data.user.id) };
    case 'project.created':
    case 'project.updated':
      return { project: await getProject(event.data.project.id) };
    case 'project.member_added':
    case 'project.member_updated':
      return {
        projectId: event.data.projectId,
        member: await getMember(event.data.projectId, event.data.member.userId),
      };
    default:
      return event.data; // tombstones carry ids only
  }
}

const seen = new Set<string>();

/** Runs a write, then checks the events it wrote: their types, and each payload against the API. */
async function step(expectedTypes: Event['type'][], write: () => Promise<unknown>): Promise<Event[]> {
  await write();
  const events = await eventsOfStep();
  expect(events.map((event) => event.type)).toEqual(expectedTypes);
  for (const event of events) {
    expect(event.data, event.type).toEqual(await asTheApiShowsIt(event));
    seen.add(event.type);
  }
  for (const event of events)
    if (event.type === 'task.created' || event.type === 'task.updated')
      shownBefore.set(event.data.task.id, await getTask(event.data.task.id));
  return events;
}

/** The `previous` of the step's one task.updated. */
const previousOf = (events: Event[]) =>
  events.flatMap((event) => (event.type === 'task.updated' ? [event.data.previous] : []));

describe('event payloads', () => {
  it('are, for every event type, exactly what the API answers for the object after the write', async () => {
    const unreadableBefore = valueOf(
      samplesOf((await service.http.get('/metrics').set(as(admin)).expect(200)).text),
      'events_unreadable_total',
      { reader: 'log' },
    );
    let tagId = '';
    let otherTagId = '';
    let taskId = '';
    let attachmentId = '';
    await step(['tag.created'], async () => {
      tagId = TagSchema.parse(
        (await service.http.post('/tags').set(as(alice)).send({ name: 'Work', color: '#00aa00' }).expect(201)).body,
      ).id;
    });
    await step(['task.created'], async () => {
      taskId = TaskSchema.parse(
        (
          await service.http
            .post('/tasks')
            .set(as(alice))
            .send({ title: 'Plan', description: 'First', dueAt: '2027-01-02T03:04:05.678Z', tagIds: [tagId] })
            .expect(201)
        ).body,
      ).id;
    });
    const patched = await step(['task.updated'], () =>
      service.http
        .patch(`/tasks/${taskId}`)
        .set(as(alice))
        .send({ title: 'Plan again', status: 'done', assigneeId: bob.user.id })
        .expect(200),
    );
    // Only what the change changed, as it was: completedAt follows the status.
    expect(previousOf(patched)).toEqual([{ title: 'Plan', status: 'todo', assigneeId: null, completedAt: null }]);
    await step(['task.updated'], () =>
      service.http
        .put(`/tasks/${taskId}`)
        .set(as(alice))
        .send({
          title: 'Replaced',
          description: '',
          status: 'in_progress',
          priority: 'high',
          dueAt: null,
          assigneeId: bob.user.id,
        })
        .expect(200),
    );
    const renamed = await step(['tag.updated', 'task.updated'], () =>
      service.http.patch(`/tags/${tagId}`).set(as(alice)).send({ name: 'Renamed' }).expect(200),
    );
    expect(previousOf(renamed)).toEqual([{ tags: [{ id: tagId, name: 'Work', color: '#00aa00' }] }]);
    await step(['tag.created'], async () => {
      otherTagId = TagSchema.parse(
        (await service.http.post('/tags').set(as(alice)).send({ name: 'Other' }).expect(201)).body,
      ).id;
    });
    await step(['task.updated'], () =>
      service.http.post(`/tasks/${taskId}/tags/${otherTagId}`).set(as(alice)).expect(201),
    );
    await step(['attachment.created', 'task.updated'], async () => {
      attachmentId = AttachmentSchema.parse(
        (
          await service.http
            .post(`/tasks/${taskId}/attachments`)
            .set(as(alice))
            .attach('file', Buffer.from('notes'), { filename: 'notes.txt', contentType: 'text/plain' })
            .expect(201)
        ).body,
      ).id;
    });
    const unattached = await step(['attachment.deleted', 'task.updated'], () =>
      service.http.delete(`/attachments/${attachmentId}`).set(as(alice)).expect(204),
    );
    expect(previousOf(unattached)).toEqual([{ attachmentCount: 1 }]);
    let commentId = '';
    const commented = await step(['comment.created', 'task.updated'], async () => {
      commentId = CommentSchema.parse(
        (await service.http.post(`/tasks/${taskId}/comments`).set(as(alice)).send({ body: 'A *note*' }).expect(201))
          .body,
      ).id;
    });
    expect(previousOf(commented)).toEqual([{ commentCount: 0 }]);
    await step(['comment.updated'], () =>
      service.http.patch(`/comments/${commentId}`).set(as(alice)).send({ body: 'A note, edited' }).expect(200),
    );
    const uncommented = await step(['comment.deleted', 'task.updated'], () =>
      service.http.delete(`/comments/${commentId}`).set(as(alice)).expect(204),
    );
    expect(previousOf(uncommented)).toEqual([{ commentCount: 1 }]);
    await step(['task.updated'], () =>
      service.http.delete(`/tasks/${taskId}/tags/${otherTagId}`).set(as(alice)).expect(204),
    );
    let subtaskId = '';
    await step(['task.created', 'task.updated'], async () => {
      subtaskId = TaskSchema.parse(
        (await service.http.post('/tasks').set(as(alice)).send({ title: 'Part', parentId: taskId }).expect(201)).body,
      ).id;
    });
    await step(['relation.created', 'task.updated'], () =>
      service.http
        .post(`/tasks/${taskId}/relations`)
        .set(as(alice))
        .send({ type: 'blocks', taskId: subtaskId })
        .expect(201),
    );
    await step(['relation.deleted', 'task.updated'], () =>
      service.http.delete(`/tasks/${subtaskId}/relations/blocked_by/${taskId}`).set(as(alice)).expect(204),
    );
    await step(['tag.deleted'], () => service.http.delete(`/tags/${otherTagId}`).set(as(alice)).expect(204));
    await step(['user.updated'], () =>
      service.http.patch(`/users/${alice.user.id}`).set(as(alice)).send({ name: 'Alice Renamed' }).expect(200),
    );
    // Its subtask becomes top-level.
    await step(['task.deleted', 'task.updated'], () =>
      service.http.delete(`/tasks/${taskId}`).set(as(alice)).expect(204),
    );
    let projectId = '';
    await step(['project.created'], async () => {
      projectId = ProjectSchema.parse(
        (await service.http.post('/projects').set(as(alice)).send({ name: 'Shared', description: 'd' }).expect(201))
          .body,
      ).id;
    });
    await step(['project.member_added'], () =>
      service.http
        .post(`/projects/${projectId}/members`)
        .set(as(alice))
        .send({ email: bob.email, role: 'viewer' })
        .expect(201),
    );
    await step(['project.updated'], () =>
      service.http.patch(`/projects/${projectId}`).set(as(alice)).send({ name: 'Shared work' }).expect(200),
    );
    await step(['project.member_updated'], () =>
      service.http
        .patch(`/projects/${projectId}/members/${bob.user.id}`)
        .set(as(alice))
        .send({ role: 'editor' })
        .expect(200),
    );
    await step(['project.member_removed'], () =>
      service.http.delete(`/projects/${projectId}/members/${bob.user.id}`).set(as(alice)).expect(204),
    );
    await step(['project.deleted'], () => service.http.delete(`/projects/${projectId}`).set(as(alice)).expect(204));
    await step(['user.deleted'], () => service.http.delete(`/users/${bob.user.id}`).set(as(admin)).expect(204));

    expect([...seen].sort()).toEqual([...EVENT_TYPES].sort());
    const unreadableAfter = valueOf(
      samplesOf((await service.http.get('/metrics').set(as(admin)).expect(200)).text),
      'events_unreadable_total',
      { reader: 'log' },
    );
    expect(unreadableAfter).toBe(unreadableBefore);
  });
});
