/**
 * The floor plan of src/, enforced (`npm run lint` runs `depcruise`; see docs/architecture.md).
 *
 * Each floor may import only floors below it (and itself). The named rules say the same thing
 * for the boundaries a reader cares most about, so a violation names the rule it breaks.
 *
 *   0 core        the vocabulary: protocol, failures, sources, requests, variants, worker contract
 *   1 config, telemetry
 *   2 machines    pure charts
 *   3 actors      the runtime: call/cast, monitor, registry, system
 *   4 workers     the thread side: ffmpeg, ffprobe, argv, pools
 *   5 store       variant stores
 *   6 sources     resolving and opening inputs
 *   7 services    the application's actors brought to life, and their clients
 *   8 http        the request path: router, stages, delivery adapter, error table
 *   9 cluster     Redis-backed scale-out around the http layer
 *  10 debug, inspect, demo
 *  11 proxy       the composition root
 *  12 index, cli  the package's faces
 */
const FLOORS = [
  ['core'],
  ['config', 'telemetry'],
  ['machines'],
  ['actors'],
  ['workers'],
  ['store'],
  ['sources'],
  ['services'],
  ['http'],
  ['cluster'],
  ['debug', 'inspect', 'demo'],
  ['proxy'],
  ['index', 'cli'],
];

/** A room is a folder under src/ or a top-level file (`src/proxy.ts`, `src/config/`…). */
const room = (name) => `^src/${name}(?:/|\\.ts$)`;
const anyOf = (names) => `^src/(?:${names.join('|')})(?:/|\\.ts$)`;

const upward = FLOORS.flatMap((names, floor) => {
  const above = FLOORS.slice(floor + 1).flat();
  if (above.length === 0) return [];
  return [
    {
      name: `no-upward-from-${names.join('-')}`,
      comment: `floor ${floor} (${names.join(', ')}) imports only floors below it`,
      severity: 'error',
      from: { path: anyOf(names) },
      to: { path: anyOf(above) },
    },
  ];
});

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'a cycle makes two rooms one; split the shared part into the lower one',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'core-imports-nothing',
      comment: 'core/ is the ground floor: it imports only itself (and packages)',
      severity: 'error',
      from: { path: room('core') },
      to: { path: '^src/', pathNot: room('core') },
    },
    {
      name: 'machines-are-pure',
      comment: 'a chart imports only core, other charts and xstate; its I/O actors are provided',
      severity: 'error',
      from: { path: room('machines') },
      to: { path: '^src/', pathNot: anyOf(['core', 'machines']) },
    },
    {
      name: 'runtime-is-not-the-app',
      comment: 'actors/ (the runtime) never imports the services, http or workers',
      severity: 'error',
      from: { path: room('actors') },
      to: { path: anyOf(['services', 'http', 'workers', 'cluster', 'sources', 'store']) },
    },
    {
      name: 'workers-know-no-charts',
      comment: 'workers/ never import machines or services',
      severity: 'error',
      from: { path: room('workers') },
      to: { path: anyOf(['machines', 'services']) },
    },
    {
      name: 'only-faces-import-proxy',
      comment: 'only cli and index import the composition root',
      severity: 'error',
      from: { path: '^src/', pathNot: anyOf(['cli', 'index', 'proxy']) },
      to: { path: room('proxy') },
    },
    {
      name: 'nothing-imports-faces',
      comment: 'cli and index are entry points, never dependencies',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: anyOf(['cli', 'index']) },
    },
    ...upward,
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    includeOnly: '^src/',
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      extensions: ['.ts', '.js', '.mjs', '.d.ts'],
    },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
