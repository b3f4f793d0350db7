"""CSS and the one script of the page (Gradio 6 takes both at launch, not in Blocks)."""

CSS = """
#sources, #compare-sources { max-height: 78vh; overflow-y: auto; }
.sources h3 { margin: 4px 0 8px; font-size: 1.05em; }
.sources h4 { margin: 14px 0 6px; padding: 0; font-size: .95em; }
.app-head { font-size: 1.1em; margin: 0 0 2px; }
.app-head span { color: var(--body-text-color-subdued); font-size: .85em; margin-left: 8px; }
.sources .src { border-left: 3px solid var(--color-accent); padding: 6px 10px; margin: 8px 0;
  background: var(--block-background-fill); border-radius: 4px; scroll-margin-top: 12px; }
.sources .src.flash { animation: src-flash 1.6s ease-out; }
@keyframes src-flash { from { background: #fde68a; } to { background: transparent; } }
.sources .src-meta { font-size: .82em; color: var(--body-text-color-subdued); margin: 2px 0 4px; }
.sources .src-meta a { margin-right: 6px; }
.sources .abstract { font-size: .9em; line-height: 1.45; margin: 4px 0; }
.sources mark, .answer mark { background: #fde68a; color: #111; padding: 0 1px; }
.sources .marker { font-weight: 700; }
.sources ol.retrieved { padding-left: 1.3em; font-size: .88em; }
.sources .snip { color: var(--body-text-color-subdued); font-size: .92em; }
.sources .empty, .sources .hint { color: var(--body-text-color-subdued); font-size: .9em; }
a.cite { font-size: .78em; vertical-align: super; text-decoration: none; font-weight: 600;
  padding: 0 1px; }
.unsupported { text-decoration: underline dotted #b45309; text-underline-offset: 3px;
  cursor: help; }
.answer .notice { font-size: .85em; color: var(--body-text-color-subdued); }
.answer .cursor { animation: blink 1s steps(1) infinite; }
@keyframes blink { 50% { opacity: 0; } }
.answer .note { color: var(--body-text-color-subdued); font-style: italic; }
.abstained .abstain-head { font-weight: 600; }
.error { color: #b91c1c; }
.compare-table { border-collapse: collapse; width: 100%; font-size: .92em; margin: 4px 0; }
.compare-table th, .compare-table td { border: 1px solid var(--border-color-primary);
  padding: 6px 8px; vertical-align: top; text-align: left; }
.compare-table th.aspect { white-space: nowrap; }
.compare-table td.missing { color: #888; font-style: italic; }
.synthesis { margin-top: 8px; }
#status { min-height: 2.4em; }
#status .status { min-height: 1.5em; font-size: .9em; color: var(--body-text-color-subdued); }
#status .status-error { color: #b91c1c; }
#paper-detail .src { border-left: 3px solid var(--color-accent); padding: 6px 10px; }
.answer, .question, .sources, .compare-table td { overflow-wrap: anywhere; }
.bridge { display: none !important; }
.gen { font-size: .68em; color: var(--body-text-color-subdued); border: 1px solid
  var(--border-color-primary); border-radius: 3px; padding: 0 3px; margin-left: 4px;
  vertical-align: super; cursor: help; font-weight: 400; white-space: nowrap; }
.related { font-size: .84em; margin: 4px 0 2px; color: var(--body-text-color-subdued); }
.related a { color: var(--link-text-color, var(--color-accent)); }
.comparison { overflow-x: auto; max-width: 100%; }
.upload-check ul, .upload-done ul { margin: 4px 0 8px 1.2em; }
/* A narrow screen (a phone: 390 px): one column, nothing wider than the page; tables scroll
   inside their own box. */
@media (max-width: 640px) {
  .gradio-container { padding-left: 4px !important; padding-right: 4px !important; }
  .app-head span { display: block; margin-left: 0; }
  #sources, #compare-sources { max-height: none; }
  .compare-table { font-size: .84em; min-width: 420px; }
  .compare-table th, .compare-table td { overflow-wrap: break-word; word-break: normal; }
  .compare-table th.aspect { white-space: normal; overflow-wrap: normal; word-break: normal;
    min-width: 5em; }
  .compare-table th, .compare-table td { padding: 4px 5px; }
  .sources code, .answer code { overflow-wrap: anywhere; }
  #chat { height: 62vh !important; }
}
"""

# Citation links scroll the sources panel to their paper and flash it. Delegated on the
# document (capture phase) because the chat re-renders its messages on every token.
HEAD = """
<script>
document.addEventListener('click', function (e) {
  var a = e.target && e.target.closest ? e.target.closest('a.cite') : null;
  if (!a) { return; }
  var id = (a.getAttribute('href') || '').replace(/^#/, '');
  var t = id ? document.getElementById(id) : null;
  if (!t) { return; }
  e.preventDefault();
  e.stopPropagation();
  t.scrollIntoView({behavior: 'smooth', block: 'start'});
  t.classList.remove('flash'); void t.offsetWidth; t.classList.add('flash');
}, true);

// Fill a hidden gradio textbox and press its hidden button: how HTML links and Plotly clicks
// reach Python (gr.HTML and gr.Plot have no such events).
function ragBridge(box, button, value) {
  var t = document.querySelector('#' + box + ' textarea, #' + box + ' input');
  var b = document.querySelector('#' + button + ' button, button#' + button);
  if (!t || !b) { return; }
  var proto = Object.getPrototypeOf(t);
  Object.getOwnPropertyDescriptor(proto, 'value').set.call(t, value);
  t.dispatchEvent(new Event('input', {bubbles: true}));
  setTimeout(function () { b.click(); }, 60);
}
document.addEventListener('click', function (e) {
  var a = e.target && e.target.closest ? e.target.closest('a.open-paper') : null;
  if (!a) { return; }
  e.preventDefault();
  e.stopPropagation();
  ragBridge('open-paper', 'open-paper-go', a.getAttribute('data-paper') || '');
}, true);
// The saved-conversation sidebar opens by default; on a phone it would cover the chat, so
// it starts closed there (its toggle stays at the edge).
(function closeSidebarOnPhones() {
  var tries = 0;
  var timer = setInterval(function () {
    var side = document.querySelector('#history');
    var toggle = side && side.querySelector('.toggle-button');
    if (toggle || ++tries > 100) { clearInterval(timer); }
    if (toggle && window.innerWidth <= 768 && side.classList.contains('open')) {
      toggle.click();
    }
  }, 100);
})();
// gradio re-creates the plot on every update: bind each new Plotly graph once.
setInterval(function () {
  document.querySelectorAll('#map .js-plotly-plot').forEach(function (gd) {
    if (gd.__ragBound || typeof gd.on !== 'function') { return; }
    gd.__ragBound = true;
    gd.on('plotly_click', function (ev) {
      var p = ev && ev.points && ev.points[0];
      if (!p || p.customdata === undefined) { return; }
      var id = Array.isArray(p.customdata) ? p.customdata[0] : p.customdata;
      ragBridge('map-click', 'map-click-go', String(id));
    });
  });
}, 500);
</script>
"""
