// How numbers and times are shown.

export function age(createdAt: number, now = Date.now() / 1000): string {
  const s = Math.max(0, Math.floor(now - createdAt));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
}

export function bytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}

export function percent(p: number): string {
  return `${p < 10 ? p.toFixed(1) : Math.round(p)}%`;
}

export function time(ms: number): string {
  return new Date(ms).toLocaleTimeString();
}

export function dateTime(seconds: number): string {
  return new Date(seconds * 1000).toLocaleString();
}

export function ownerName(owner: string | undefined): string {
  return owner ? owner : "(host)";
}
