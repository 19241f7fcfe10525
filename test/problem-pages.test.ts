import { describe, expect, it } from 'vitest';
import { problemCatalogue, ProblemCodeSchema, ProblemPageSchema } from '../contract/index.js';
import { serviceForFile } from './support/app.js';
import { expectProblem } from './support/problems.js';

const BROWSER_ACCEPT = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8';

const service = serviceForFile();

describe('GET /problems/{code}', () => {
  it('is a page for a browser: what the code means and what to do', async () => {
    for (const code of ProblemCodeSchema.options) {
      const res = await service.http
        .get(`/problems/${code}`)
        .set('Accept', BROWSER_ACCEPT)
        .expect(200)
        .expect('Content-Type', /^text\/html; charset=utf-8/);
      expect(res.headers.vary).toMatch(/Accept/);
      expect(res.headers['content-security-policy']).toContain("default-src 'none'");
      const entry = problemCatalogue[code];
      expect(res.text).toMatch(/^<!doctype html>/);
      expect(res.text).toContain(`<title>${entry.title} (${code}) · Task service problems</title>`);
      expect(res.text).toContain(`<h1>${entry.title}</h1>`);
      expect(res.text).toContain(`HTTP ${entry.status}`);
      expect(res.text).toContain('href="/problems"');
    }
    const page = await service.http.get('/problems/validation_failed').set('Accept', 'text/html').expect(200);
    // Inline code of the catalogue is shown as code; nothing of it is markup.
    expect(page.text).toContain('<code>errors</code>');
    expect(page.text).not.toContain('`');
  });

  it('stays JSON for every other client', async () => {
    for (const accept of [undefined, 'application/json', '*/*', 'application/problem+json, application/json']) {
      const req = service.http.get('/problems/not_found');
      const res = await (accept ? req.set('Accept', accept) : req)
        .expect(200)
        .expect('Content-Type', /^application\/json/);
      expect(ProblemPageSchema.parse(res.body).code).toBe('not_found');
    }
  });

  it('lists the catalogue as a page for a browser too', async () => {
    const res = await service.http
      .get('/problems')
      .set('Accept', BROWSER_ACCEPT)
      .expect(200)
      .expect('Content-Type', /^text\/html/);
    for (const code of ProblemCodeSchema.options) expect(res.text).toContain(`href="/problems/${code}"`);
    await service.http
      .get('/problems')
      .expect(200)
      .expect('Content-Type', /^application\/json/);
  });

  it('answers an unknown code with the 404 problem, whatever is accepted', async () => {
    expectProblem(
      await service.http.get('/problems/no_such_code').set('Accept', BROWSER_ACCEPT),
      404,
      'not_found',
      '/problems/no_such_code',
    );
  });
});
