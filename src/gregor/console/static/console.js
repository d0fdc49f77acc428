// The overview's live charts: poll /api/throughput every 2 s and draw records/s per topic and
// lag per group with Chart.js (Debian's libjs-chart.js). Other pages need no script.
(function () {
  const throughputCanvas = document.getElementById("throughput-chart");
  const lagCanvas = document.getElementById("lag-chart");
  if (!throughputCanvas || !lagCanvas || typeof Chart === "undefined") { return; }
  const keep = 60;
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
        set = { label: name, data: chart.data.labels.slice(0, -1).map(() => null), tension: 0.2 };
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
  async function poll() {
    try {
      const answer = await fetch("/api/throughput");
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
