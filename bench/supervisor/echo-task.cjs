// A Piscina task module: echoes, or burns `spinMs` of CPU to stand in for a render's JS work.
module.exports = function task({ value, spinMs = 0 }) {
  const end = performance.now() + spinMs;
  while (performance.now() < end) {}
  return value;
};
