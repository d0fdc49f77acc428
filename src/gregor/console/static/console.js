// The overview's live charts: poll /api/throughput every 2 s and draw records/s per topic and
// lag per group with Chart.js (Debian's libjs-chart.js). Other pages need no script.
// Chart.js 3 has no default palette (every series would be the same grey), so each series gets
// its own colour: a fixed palette of distinct colours first, then hues spread by the golden angle.
(function () {
  const throughputCanvas = document.getElementById("throughput-chart");
  const lagCanvas = document.getElementById("lag-chart");
  if (!throughputCanvas || !lagCanvas || typeof Chart === "undefined") { return; }
  const keep = 60;
  const palette = ["#2f6fde", "#e8590c", "#2b8a3e", "#c2255c", "#7048e8", "#0c8599", "#e67700", "#5c940d",
                   "#a61e4d", "#1864ab", "#862e9c", "#495057"];
  function colour(index) {
    if (index < palette.length) { return palette[index]; }
    const hue = Math.round((index * 137.508) % 360);
    return "hsl(" + hue + ", 65%, 45%)";
  }
  function lineChart(canvas, title) {
    return new Chart(canvas, {
      type: "line",
      data: { labels: [], datasets: [] },
      options: { animation: false, responsive: true, maintainAspectRatio: false, plugins: { title: { display: true, text: title } },
                 scales: { y: { beginAtZero: true } } },
    });
  }
  const charts = { throughput: lineChart(throughputCanvas, "records/s per topic"),
                   lag: lineChart(lagCanvas, "lag per consumer group (records)") };
  function push(chart, label, values) {
    chart.data.labels.push(label);
    for (const [name, value] of Object.entries(values)) {
      let set = chart.data.datasets.find((d) => d.label === name);
      if (!set) {
        const c = colour(chart.data.datasets.length);
        set = { label: name, data: chart.data.labels.slice(0, -1).map(() => null), tension: 0.2,
                borderColor: c, backgroundColor: c, pointBackgroundColor: c };
        chart.data.datasets.push(set);
      }
      set.data.push(value);
    }
    for (const set of chart.data.datasets) {
      while (set.data.length < chart.data.labels.length) { set.data.push(null); }
      if (set.data.length > keep) { set.data.shift(); }
    }
    if (chart.data.labels.length > keep) { chart.data.labels.shift(); }
    chart.update();
  }
  const status = document.getElementById("live-status");
  async function poll() {
    try {
      const answer = await fetch("/api/throughput", { credentials: "same-origin" });
      if (answer.status === 401) { window.location.assign("/login?ended=1"); return; }
      if (!answer.ok) {
        if (status) { status.textContent = answer.status === 503 ? "The broker is unreachable: retrying." : "The cluster refused the poll."; }
        return;
      }
      if (status) { status.textContent = ""; }
      const data = await answer.json();
      const label = new Date(data.time * 1000).toLocaleTimeString();
      push(charts.throughput, label, data.records_per_sec);
      push(charts.lag, label, data.lag);
      window.gregorPolls = (window.gregorPolls || 0) + 1;
    } catch (e) { /* the next poll tries again */ }
  }
  poll();
  setInterval(poll, 2000);
})();
