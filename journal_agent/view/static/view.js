// journal-agent view: search as you type, highlighted code lines, review cards, live reload.
// No framework and no build step; every text from the server is set with textContent.
"use strict";
(function () {
  const live = document.querySelector('meta[name="live"]') !== null;
  const csrfMeta = document.querySelector('meta[name="csrf-token"]');
  const base = document.body.dataset.base || "";
  // A button's POST (rating, inbox, drafts): same origin, with the page's CSRF token, which the
  // server requires of every request that changes something.
  const postForm = (form, fields) => fetch(form.getAttribute("action"), {
    method: "POST",
    credentials: "same-origin",
    headers: {"X-CSRF-Token": csrfMeta ? csrfMeta.content : ""},
    body: new URLSearchParams(fields),
  });

  // -- search as you type (the journal page) ---------------------------------------------
  const box = document.getElementById("search");
  if (box) {
    const results = document.getElementById("results");
    const listing = document.getElementById("listing");
    const note = document.getElementById("search-note");
    let timer = null;
    let asked = 0;
    const show = (hits, message) => {
      results.replaceChildren();
      for (const hit of hits) {
        const li = document.createElement("li");
        const a = document.createElement("a");
        a.href = base + hit.href;
        a.className = "hit";
        a.textContent = hit.title;
        const date = document.createElement("small");
        date.textContent = " " + hit.date;
        li.append(a, date);
        if (hit.snippet) {
          const p = document.createElement("p");
          p.className = "snippet";
          p.textContent = hit.snippet;
          li.append(p);
        }
        results.append(li);
      }
      note.textContent = message || (hits.length ? "" : "No entry matches.");
      note.hidden = !note.textContent;
      results.hidden = false;
      listing.hidden = true;
    };
    const offline = (query) => {
      const words = query.toLowerCase().split(/\s+/).filter(Boolean);
      const hits = (window.JOURNAL_INDEX || []).filter((e) => {
        const text = (e.title + " " + e.tags.map((t) => "#" + t).join(" ")).toLowerCase();
        return words.every((w) => text.includes(w));
      });
      show(hits.slice(0, 50), "Exported page: titles and tags are searched here; `journal-agent view` searches by words and meaning.");
    };
    // Words first (the index alone answers at once), then the CLI's own list (words and
    // meaning fused), asked for only while the query is still the latest one.
    const ask = async (query) => {
      const n = ++asked;
      results.removeAttribute("data-done");
      const url = base + "api/search?q=" + encodeURIComponent(query);
      const words = await fetch(url + "&words=1", {credentials: "same-origin"});
      if (n !== asked) return; // a later keystroke already asked again
      const first = await words.json();
      if (!words.ok) { show([], first.error || "Search failed."); results.dataset.done = query; return; }
      show(first.hits, first.note);
      const response = await fetch(url, {credentials: "same-origin"});
      if (n !== asked) return;
      const data = await response.json();
      if (!response.ok) { show([], data.error || "Search failed."); results.dataset.done = query; return; }
      show(data.hits, data.note);
      results.dataset.done = query; // the final list: the same as `journal-agent journal search`
    };
    box.addEventListener("input", () => {
      clearTimeout(timer);
      const query = box.value.trim();
      if (!query) {
        asked++; // an answer still on its way is for a query no longer in the box: drop it
        results.hidden = true; note.hidden = true; listing.hidden = false;
        return;
      }
      timer = setTimeout(() => (live ? ask(query) : offline(query)), 120);
    });
  }

  // -- related entries, asked for once the entry page is shown ---------------------------------
  const related = document.getElementById("related");
  if (related && live) {
    (async () => {
      const note = document.getElementById("related-note");
      const response = await fetch(related.dataset.api, {credentials: "same-origin"});
      const data = await response.json();
      for (const hit of data.hits || []) {
        const li = document.createElement("li");
        const a = document.createElement("a");
        a.href = base + hit.href;
        a.textContent = hit.title;
        const date = document.createElement("small");
        date.textContent = " " + hit.date;
        li.append(a, date);
        related.append(li);
      }
      note.textContent = related.children.length ? "" : "none found";
      note.hidden = related.children.length > 0;
    })();
  }

  // -- entries that disagree (contradictions, near-duplicates), asked for once shown ----------
  const disagree = document.getElementById("disagree");
  if (disagree && live) {
    (async () => {
      const response = await fetch(disagree.dataset.api, {credentials: "same-origin"});
      const data = await response.json();
      const list = disagree.querySelector("ul");
      for (const d of data.pairs || []) {
        const li = document.createElement("li");
        const kind = document.createElement("span");
        kind.className = "kind kind-" + d.kind;
        kind.textContent = d.kind.replace("_", " ");
        const one = document.createElement("a");
        one.href = base + d.href;
        one.textContent = d.title;
        const other = document.createElement("a");
        other.href = base + d.other_href;
        other.textContent = d.other_title;
        const detail = document.createElement("small");
        detail.textContent = " " + d.detail;
        li.append(kind, " ", one, " ↔ ", other, detail);
        list.append(li);
      }
      disagree.hidden = list.children.length === 0;
      disagree.dataset.done = "1";
    })();
  }

  // -- the cited lines of a code page ------------------------------------------------------
  const highlight = () => {
    for (const row of document.querySelectorAll("tr.hl")) row.classList.remove("hl");
    const m = /^#L(\d+)(?:-L?(\d+))?$/.exec(location.hash);
    if (!m) return;
    const start = Number(m[1]);
    const end = Number(m[2] || m[1]);
    for (let n = start; n <= end; n++) {
      const row = document.getElementById("L" + n);
      if (row) row.classList.add("hl");
    }
    for (const row of document.querySelectorAll("tr[data-lines]")) {
      row.classList.toggle("hl", "#" + row.dataset.lines === location.hash);
    }
    const first = document.getElementById("L" + start);
    if (first) first.scrollIntoView({block: "center"});
  };
  if (document.querySelector("table.code")) {
    window.addEventListener("hashchange", highlight);
    highlight();
  }

  // -- review cards ------------------------------------------------------------------------
  for (const card of document.querySelectorAll("section.card")) {
    const answer = card.querySelector(".answer");
    const button = card.querySelector("button.show");
    button.addEventListener("click", () => { answer.hidden = false; button.hidden = true; });
    // A number card: the answer is checked against the record on the server.
    const check = card.querySelector("form.check");
    if (check) {
      check.addEventListener("submit", async (event) => {
        event.preventDefault();
        const verdict = card.querySelector(".verdict");
        const response = await postForm(check, {id: card.dataset.id, answer: check.querySelector("input").value});
        const data = await response.json();
        verdict.hidden = false;
        verdict.className = "verdict " + (response.ok ? "verdict-" + data.result : "error");
        verdict.textContent = response.ok ? data.sentence + " (suggested: " + data.rating + ")" : data.error;
        if (response.ok) { answer.hidden = false; button.hidden = true; }
      });
    }
    // An entry card whose code changed: it still holds (record the code), or revise the entry.
    const act = card.querySelector("form.code-act");
    if (act) {
      act.addEventListener("submit", async (event) => {
        event.preventDefault();
        const action = event.submitter ? event.submitter.value : "revise";
        for (const b of act.querySelectorAll("button")) b.disabled = true;
        card.classList.add("pending");
        const response = await postForm(act, {id: card.dataset.id, action: action});
        const data = await response.json();
        card.classList.remove("pending");
        const outcome = card.querySelector(".code-outcome");
        outcome.hidden = false;
        if (!response.ok) {
          outcome.textContent = data.error || "Nothing was done.";
          for (const b of act.querySelectorAll("button")) b.disabled = false;
          return;
        }
        card.classList.add("acted"); // what was done stays on screen (no reload)
        act.hidden = true;
        outcome.textContent = data.recorded
          ? "Recorded the code as it is now: " + data.recorded.join(", ") + "."
          : "A moment waits in the inbox (" + data.moment + "): /learn with no topic revises the entry.";
      });
    }
    const form = card.querySelector("form.rate");
    if (!form) continue;
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const rating = event.submitter ? event.submitter.value : "good";
      card.classList.add("pending"); // no live reload while the answer is on its way
      const response = await postForm(form, {id: card.dataset.id, rating: rating});
      const data = await response.json();
      const rated = card.querySelector(".rated");
      rated.hidden = false;
      card.classList.remove("pending");
      if (!response.ok) { rated.textContent = data.error || "The rating was not saved."; return; }
      answer.hidden = true;
      card.classList.add("done");
      rated.textContent = "Rated " + data.rating + "; next review " + data.due.slice(0, 10) + ".";
    });
  }

  // -- inbox: accept (queue for /learn) or dismiss a captured moment ----------------------------
  for (const moment of document.querySelectorAll("section.moment")) {
    const form = moment.querySelector("form.act");
    if (!form) continue;
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const action = event.submitter ? event.submitter.value : "dismiss";
      for (const b of form.querySelectorAll("button")) b.disabled = true;
      moment.classList.add("pending"); // no live reload while the answer is on its way
      const response = await postForm(form, {id: moment.dataset.id, action: action});
      const data = await response.json();
      const outcome = moment.querySelector(".outcome");
      outcome.hidden = false;
      moment.classList.remove("pending");
      if (!response.ok) {
        outcome.textContent = data.error || "Nothing was done.";
        for (const b of form.querySelectorAll("button")) b.disabled = false;
        return;
      }
      moment.classList.add("done");
      form.hidden = true;
      outcome.textContent = data.accepted
        ? "Queued for /learn: run /learn with no topic to write it (nothing is written until then)."
        : "Dismissed.";
    });
  }

  // -- inbox: accept a draft into the journal (checked, as `inbox accept-draft`) or reject it --
  for (const draft of document.querySelectorAll("section.draft")) {
    const form = draft.querySelector("form.act");
    if (!form) continue;
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const action = event.submitter ? event.submitter.value : "reject";
      for (const b of form.querySelectorAll("button")) b.disabled = true;
      draft.classList.add("pending"); // no live reload while the answer is on its way
      const outcome = draft.querySelector(".outcome");
      const problems = draft.querySelector("ul.problems");
      let response = null;
      let data = {};
      try {
        response = await postForm(form, {id: draft.dataset.id, action: action});
        data = await response.json();
      } catch (e) { data = {error: "The server did not answer; nothing was done."}; }
      problems.replaceChildren();
      for (const p of data.problems || []) {
        const item = document.createElement("li");
        item.textContent = (p.line ? draft.dataset.id + ".md:" + p.line + "  " : "") + p.kind + ": " + p.detail;
        problems.append(item);
      }
      problems.hidden = !problems.children.length;
      outcome.hidden = false;
      if (!response || !response.ok) {
        outcome.textContent = data.error || "Nothing was done.";
        for (const b of form.querySelectorAll("button")) b.disabled = false;
        draft.classList.remove("pending");
        draft.classList.add("refused");
        return;
      }
      draft.classList.remove("pending", "refused");
      draft.classList.add("done");
      form.hidden = true;
      outcome.textContent = data.appended
        ? "Appended " + data.entry + " at learning_journal.md:" + data.line + "."
          + (data.marked.length ? " Marked written: " + data.marked.join(", ") + "." : "")
          + (data.warnings.length ? " " + data.warnings.join(" ") : "")
        : "Rejected: the draft is deleted; its moments still wait below.";
    });
  }

  // -- follow the files: reload when what the page shows changed ----------------------------
  if (live) {
    // What the page was made from (the server stamps it as it renders): an edit made while
    // the page was loading differs from it and reloads the page.
    let stamp = document.body.dataset.stamp || null;
    let searched = null; // the stamp the query in the box was last asked again for
    // The workspace files this page shows (an entry's cited code, a code page's file): their
    // changes reload it too, so a reference's state and the lines shown follow your edits.
    const watched = new URLSearchParams();
    for (const file of JSON.parse(document.body.dataset.watch || "[]")) watched.append("file", file);
    const stampUrl = base + "api/stamp" + (watched.toString() ? "?" + watched : "");
    const poll = async () => {
      try {
        const response = await fetch(stampUrl, {credentials: "same-origin", cache: "no-store"});
        if (response.ok) {
          const data = await response.json();
          if (stamp === null || data.stamp === stamp) {
            stamp = data.stamp;
          } else if (box && box.value.trim()) {
            // A query in the box: a reload would lose it. Ask again (a new entry may match);
            // the page reloads once the box is emptied.
            if (data.stamp !== searched) { searched = data.stamp; box.dispatchEvent(new Event("input")); }
          } else if (!document.querySelector(".pending, section.card.done, section.card.acted, section.moment.done, section.draft.done")) {
            location.reload();
            return;
          } else {
            stamp = data.stamp; // what you did here stays on screen
          }
        }
      } catch (e) { /* the server stopped: keep the page as it is */ }
      setTimeout(poll, 1500);
    };
    poll();
  }
})();
