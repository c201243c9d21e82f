// A small hand-drawn line chart (SVG): the last samples of one number.

const SVG = "http://www.w3.org/2000/svg";

export class Sparkline {
  readonly element: SVGSVGElement;
  private readonly line: SVGPolylineElement;
  private readonly area: SVGPolygonElement;

  constructor(
    private readonly label: string,
    private readonly width = 240,
    private readonly height = 48,
  ) {
    this.element = document.createElementNS(SVG, "svg");
    this.element.setAttribute("viewBox", `0 0 ${width} ${height}`);
    this.element.setAttribute("width", String(width));
    this.element.setAttribute("height", String(height));
    this.element.setAttribute("role", "img");
    this.element.setAttribute("aria-label", label);
    this.element.classList.add("sparkline");
    this.area = document.createElementNS(SVG, "polygon");
    this.area.classList.add("sparkline-area");
    this.line = document.createElementNS(SVG, "polyline");
    this.line.classList.add("sparkline-line");
    this.element.append(this.area, this.line);
  }

  // `max`: the top of the chart (at least the largest value).
  update(values: number[], max: number, description: string): void {
    const top = Math.max(max, ...values, 1e-9);
    const n = values.length;
    const step = n > 1 ? this.width / (n - 1) : 0;
    const points = values.map((v, i) => {
      const x = n > 1 ? i * step : this.width;
      const y = this.height - 1 - (v / top) * (this.height - 2);
      return `${x.toFixed(1)},${y.toFixed(1)}`;
    });
    this.line.setAttribute("points", points.join(" "));
    const first = n > 1 ? 0 : this.width;
    this.area.setAttribute(
      "points",
      n > 0 ? `${first},${this.height} ${points.join(" ")} ${this.width},${this.height}` : "",
    );
    this.element.setAttribute("aria-label", `${this.label}: ${description}`);
  }
}
