// Which credential a path of the service takes: an API key (/api/v1), the admin token (/admin/v1,
// /internal/v1), or none (health, the API's own description, signed media links).

export type Surface = 'api' | 'admin' | 'open';

/** Under /api/v1 but answered without a key: the API's own description (src/openapi/routes.ts). */
const KEYLESS = new Set(['/api/v1/openapi.json', '/api/v1/event-types']);

export const surfaceOf = (path: string): Surface =>
  KEYLESS.has(path) ? 'open' : path.startsWith('/api/v1/') ? 'api' : path.startsWith('/admin/v1/') || path.startsWith('/internal/v1/') ? 'admin' : 'open';
