import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { exportPKCS8, generateKeyPair } from 'jose';
import pg from 'pg';
import { pino } from 'pino';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../server/app.js';
import { createContext } from '../server/bootstrap.js';
import { loadConfig } from '../server/config.js';
import { openPostgres, type Database } from '../server/db/database.js';
import { pgSql } from '../server/db/sql.js';
import { migrate, pendingMigrations, readMigrations } from '../server/db/migrate.js';
import { freshDatabase, postgresUrl, type TestDatabase } from './support/databases.js';

// Several instances of the service on one PostgreSQL database: the production set-up.
describe('several instances on one PostgreSQL database', () => {
  it('apply each migration once when they start together', async () => {
    const admin = postgresUrl();
    const name = `task_service_race_${randomUUID().replace(/-/g, '')}`;
    const client = new pg.Client({ connectionString: admin });
    await client.connect();
    await client.query(`CREATE DATABASE ${name}`);
    const url = new URL(admin);
    url.pathname = `/${name}`;
    const pools = [1, 2, 3].map(() => new pg.Pool({ connectionString: url.toString(), max: 1 }));
    // DROP … WITH (FORCE) below may reach a connection pg is still closing; that is no error of the migrator.
    for (const pool of pools) pool.on('error', () => undefined);
    try {
      const results = await Promise.all(pools.map((pool) => migrate(pgSql(pool))));
      const all = (await readMigrations()).map((m) => m.name);
      expect(results.flat().sort()).toEqual(all.sort());
      expect(await pendingMigrations(pgSql(pools[0]!), await readMigrations())).toEqual([]);
    } finally {
      await Promise.all(pools.map((pool) => pool.end()));
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await client.end();
    }
  });

  describe('sharing sessions and throttling', () => {
    let database: TestDatabase;
    let second: Database;
    let dataDirs: string[];
    let a: ReturnType<typeof request>;
    let b: ReturnType<typeof request>;

    beforeAll(async () => {
      database = await freshDatabase();
      second = openPostgres(database.url, { poolSize: 2 });
      const { privateKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519', extractable: true });
      const key = await exportPKCS8(privateKey);
      dataDirs = await Promise.all([1, 2].map(() => mkdtemp(path.join(tmpdir(), 'instance-'))));
      const make = async (db: Database, dataDir: string) => {
        const config = loadConfig({
          DATA_DIR: dataDir,
          JWT_PRIVATE_KEY: key,
          LOG_LEVEL: 'silent',
          RATE_LIMIT_PER_MINUTE: '0',
          LOGIN_MAX_FAILURES_PER_ACCOUNT_ADDRESS: '2',
        });
        return request(buildApp(await createContext(config, db, pino({ level: 'silent' }))));
      };
      a = await make(database.db, dataDirs[0]!);
      b = await make(second, dataDirs[1]!);
    });
    afterAll(async () => {
      await second.close();
      await database.drop();
      await Promise.all(dataDirs.map((dir) => rm(dir, { recursive: true, force: true })));
    });

    it('honour a logout on one instance at once on the other', async () => {
      const reg = await a.post('/auth/register').send({ email: 'shared@example.test', password: 'long enough password', name: 'S' }).expect(201);
      const auth = `Bearer ${reg.body.accessToken}`;
      await b.get('/auth/me').set('Authorization', auth).expect(200);
      await a.post('/auth/logout').set('Authorization', auth).expect(204);
      await b.get('/auth/me').set('Authorization', auth).expect(401);
      await b.post('/auth/refresh').send({ refreshToken: reg.body.refreshToken }).expect(401);
    });

    it('count failed logins across instances', async () => {
      await a.post('/auth/register').send({ email: 'target@example.test', password: 'long enough password', name: 'T' }).expect(201);
      await a.post('/auth/login').send({ email: 'target@example.test', password: 'wrong password' }).expect(401);
      await b.post('/auth/login').send({ email: 'target@example.test', password: 'wrong password' }).expect(401);
      const blocked = await a.post('/auth/login').send({ email: 'target@example.test', password: 'long enough password' }).expect(429);
      expect(Number(blocked.headers['retry-after'])).toBeGreaterThan(0);
    });
  });
});
