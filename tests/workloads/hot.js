// hotA burns MS (argument, default 400) ms of CPU in a loop V8 compiles, hotB half that; prints each one's CPU time.
function cpuNs() { const u = process.cpuUsage(); return (u.user + u.system) * 1000; }
function hotA(ns) {
  const end = cpuNs() + ns; let x = 1;
  while (cpuNs() < end) for (let i = 0; i < 2000000; i++) x = (x * 1103515245 + i) | 0;
  return x;
}
function hotB(ns) {
  const end = cpuNs() + ns; let x = 7;
  while (cpuNs() < end) for (let i = 0; i < 2000000; i++) x = (x * 69069 + 3 * i) | 0;
  return x;
}
function phase(f, ns) { const t0 = cpuNs(); f(ns); return cpuNs() - t0; }
const ms = Number(process.argv[2] || 400);
const a = phase(hotA, ms * 1e6), b = phase(hotB, ms * 5e5);
console.log(`hotA ${a}`); console.log(`hotB ${b}`);
