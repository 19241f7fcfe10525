import { perInstance } from './per-instance.js';
import { PassThrough, type Readable } from 'node:stream';
import type { Event } from '@task-service/client';
import type { AppContext } from '../context.js';
import { tables } from '../db/query.js';
import { eventMetrics } from './metrics.js';
import {
  currentHorizon,
  eventSeenBy,
  isAfter,
  later,
  projectsOfReaders,
  readLog,
  readsEventType,
  visibleTo,
  type LoggedEvent,
  type Position,
  type Reader,
} from './log.js';
import { eventSignal } from './signal.js';
import { liveTokenRoles } from '../tokens/authenticate.js';
import { liveGrantRoles } from '../tokens/app-grants.js';

const PAGE = 1000;
const NONE: ReadonlySet<string> = new Set();
/** A client that reads slower than events come is cut off; it resumes with Last-Event-ID. */
const MAX_BUFFERED_BYTES = 1024 * 1024;

interface Stream {
  reader: Reader;
  sessionId: string;
  position: Position;
  out: PassThrough;
  /** Deliveries to one stream run one after the other. */
  queue: Promise<void>;
  /** Ends the stream when the token that opened it expires. */
  expiry: NodeJS.Timeout | undefined;
}

const frame = (event: Event) => `id: ${event.id}\nevent: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`;

/**
 * The live streams of one instance. One reader follows the whole log when woken (by NOTIFY from
 * any instance, or the heartbeat) and hands each stream what it may see; a stream that is behind
 * (resuming with Last-Event-ID) catches up with its own reads first.
 */
class StreamHub {
  private readonly streams = new Set<Stream>();
  private position: Position | undefined;
  private starting: Promise<Position> | undefined;
  private reading = false;
  private readAgain = false;
  private stopListening: (() => void) | undefined;
  private heartbeat: NodeJS.Timeout | undefined;

  constructor(private readonly ctx: AppContext) {}

  /**
   * Opens a stream from `resumeAfter`, or from now, until `endsAtMs` (the opening token's expiry).
   * The caller pipes the result to the client.
   */
  async open(
    reader: Reader,
    sessionId: string,
    resumeAfter: Position | undefined,
    endsAtMs?: number,
  ): Promise<{ body: Readable; close: () => void }> {
    const now = await this.start();
    const stream: Stream = {
      reader,
      sessionId,
      position: resumeAfter ?? now,
      out: new PassThrough(),
      queue: Promise.resolve(),
      expiry: undefined,
    };
    this.streams.add(stream);
    if (endsAtMs !== undefined) {
      stream.expiry = setTimeout(() => this.close(stream), Math.max(0, endsAtMs - Date.now()));
      stream.expiry.unref();
    }
    eventMetrics(this.ctx).openStreams.inc();
    eventMetrics(this.ctx).streamsOpened.inc();
    stream.out.write(': connected\n\n');
    if (resumeAfter) this.enqueue(stream, () => this.catchUp(stream));
    return { body: stream.out, close: () => this.close(stream) };
  }

  private start(): Promise<Position> {
    if (this.position) return Promise.resolve(this.position);
    this.starting ??= currentHorizon(this.ctx).then((horizon) => {
      this.position = horizon;
      this.stopListening = eventSignal(this.ctx).subscribe(() => this.follow());
      this.heartbeat = setInterval(() => this.beat(), this.ctx.config.events.heartbeatSeconds * 1000);
      this.heartbeat.unref();
      return horizon;
    });
    return this.starting.finally(() => (this.starting = undefined));
  }

  private stop(): void {
    this.stopListening?.();
    this.stopListening = undefined;
    clearInterval(this.heartbeat);
    this.position = undefined;
  }

  private close(stream: Stream): void {
    if (!this.streams.delete(stream)) return;
    clearTimeout(stream.expiry);
    eventMetrics(this.ctx).openStreams.dec();
    stream.out.end();
    if (this.streams.size === 0) this.stop();
  }

  private enqueue(stream: Stream, work: () => Promise<void>): void {
    stream.queue = stream.queue.then(work).catch((error: unknown) => {
      this.ctx.logger.warn({ err: error }, 'an event stream failed; the client may resume with Last-Event-ID');
      this.close(stream);
    });
  }

  /** `projects`: the projects of the batch the stream's user is a member of, as read for this batch. */
  private send(stream: Stream, logged: LoggedEvent, projects: ReadonlySet<string>): void {
    if (!isAfter(logged.position, stream.position)) return;
    stream.position = logged.position;
    if (!visibleTo({ ...stream.reader, projects }, logged) || !readsEventType(stream.reader, logged.event.type)) return;
    stream.out.write(frame(eventSeenBy(stream.reader, logged)));
    eventMetrics(this.ctx).streamEventsSent.inc();
    if (stream.out.writableLength > MAX_BUFFERED_BYTES) this.close(stream);
  }

  /** Reads the log as `stream`'s reader sees it until the stream is at the horizon. */
  private async catchUp(stream: Stream): Promise<void> {
    for (;;) {
      await this.checkSessions([stream]);
      if (!this.streams.has(stream)) return;
      const page = await readLog(this.ctx, stream.position, PAGE, stream.reader);
      const projects = await this.memberships([stream], page.events);
      for (const logged of page.events) this.send(stream, logged, projects.get(stream.reader.userId) ?? NONE);
      stream.position = later(stream.position, page.next);
      if (page.events.length < PAGE || !this.streams.has(stream)) return;
    }
  }

  /** Reads what committed since the last read and hands it to every stream; one read at a time. */
  private follow(): void {
    if (this.reading) {
      this.readAgain = true;
      return;
    }
    this.reading = true;
    void (async () => {
      try {
        do {
          this.readAgain = false;
          const from = this.position;
          if (!from) return;
          const page = await readLog(this.ctx, from, PAGE);
          eventMetrics(this.ctx).fanoutReads.inc();
          eventMetrics(this.ctx).fanoutEvents.inc(page.events.length);
          // Role and visibility per event from the current state: a demoted admin sees no more of others' events.
          if (page.events.length > 0) await this.checkSessions();
          const projects = await this.memberships([...this.streams], page.events);
          if (!this.position) return;
          this.position = page.next;
          if (page.events.length === PAGE) this.readAgain = true;
          for (const stream of this.streams)
            this.enqueue(stream, async () =>
              this.deliver(stream, from, page.events, page.next, projects.get(stream.reader.userId) ?? NONE),
            );
        } while (this.readAgain);
      } catch (error) {
        this.ctx.logger.warn(
          { err: error },
          'reading the event log for live streams failed; retrying at the next heartbeat',
        );
      } finally {
        this.reading = false;
      }
    })();
  }

  private async deliver(
    stream: Stream,
    from: Position,
    events: LoggedEvent[],
    to: Position,
    projects: ReadonlySet<string>,
  ): Promise<void> {
    if (isAfter(from, stream.position)) return this.catchUp(stream); // behind what the hub read
    for (const logged of events) this.send(stream, logged, projects);
    stream.position = later(stream.position, to);
  }

  /** Keeps proxies open, ends streams whose session ended, and reads in case a signal was lost. */
  private beat(): void {
    for (const stream of this.streams) stream.out.write(': heartbeat\n\n');
    void this.checkSessions().catch((error: unknown) =>
      this.ctx.logger.warn({ err: error }, 'checking the sessions of event streams failed'),
    );
    this.follow();
  }

  /**
   * Of the projects of `events`, those each stream's user is a member of now (read once per batch,
   * handed to the batch's deliveries), so a removed member's stream receives nothing more of the
   * project from the next event on.
   */
  private async memberships(streams: Stream[], events: LoggedEvent[]): Promise<Map<string, Set<string>>> {
    const projectIds = events.flatMap((logged) => (logged.projectId === null ? [] : [logged.projectId]));
    const users = streams.filter((stream) => !stream.reader.admin).map((stream) => stream.reader.userId);
    return projectsOfReaders(this.ctx, users, projectIds);
  }

  /** Ends the streams whose session ended, and gives the others their user's current role. */
  private async checkSessions(streams = [...this.streams]): Promise<void> {
    if (streams.length === 0) return;
    const live = await this.ctx.db.sql.all(
      tables
        .selectFrom('sessions')
        .innerJoin('users', 'users.id', 'sessions.user_id')
        .select(['sessions.id', 'users.role'])
        .where('sessions.id', 'in', [...new Set(streams.map((s) => s.sessionId))])
        .where('sessions.revoked_at', 'is', null),
    );
    const roles = new Map(live.map((session) => [session.id, session.role]));
    // A stream opened with a personal access token carries the token's id: live while it is unexpired;
    // one opened with an OAuth token carries its grant's id: live until the grant is revoked.
    const ids = streams.map((s) => s.sessionId);
    for (const [id, role] of await liveTokenRoles(this.ctx, ids)) roles.set(id, role);
    for (const [id, role] of await liveGrantRoles(this.ctx, ids)) roles.set(id, role);
    for (const stream of streams) {
      const role = roles.get(stream.sessionId);
      if (role === undefined) this.close(stream);
      else stream.reader.admin = role === 'admin';
    }
  }

  /** Ends every stream (shutdown); clients reconnect to another instance and resume. */
  closeAll(): void {
    for (const stream of [...this.streams]) this.close(stream);
  }
}

export const streamHub = perInstance((ctx) => new StreamHub(ctx));
