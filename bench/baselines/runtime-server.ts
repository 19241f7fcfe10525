// Baseline (a), the runtime's limit: bare node:http answering one fixed task body.
import { createServer } from 'node:http';
import { listenAndReport } from './listen.js';

const TASK = JSON.stringify({
  id: '0190a0b4-6d1e-7c3a-9f3e-2b6c1d4e5f60',
  ownerId: '0190a0b4-6d1e-7c3a-9f3e-2b6c1d4e5f61',
  assigneeId: null,
  title: 'Task 3f2a9c1b7e4d',
  description: '',
  status: 'todo',
  priority: 'medium',
  dueAt: '2026-12-01T10:00:00.000Z',
  completedAt: null,
  tags: [{ id: '0190a0b4-6d1e-7c3a-9f3e-2b6c1d4e5f62', name: 'tag-1', color: '#3366cc' }],
  attachmentCount: 1,
  version: 1,
  createdAt: '2026-11-23T10:00:00.000Z',
  updatedAt: '2026-11-23T10:00:00.000Z',
});

const server = createServer((_req, res) => {
  res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', etag: '"1"' });
  res.end(TASK);
});
await listenAndReport(server);
