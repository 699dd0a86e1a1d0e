// How the book's search ranks (Sphinx's Scorer, html_search_scorer in web/conf.py): Sphinx's own weights, then by
// the kind of page among pages that match. A chapter teaches its subject, so it comes first; an exercise practises
// a piece of it; the index pages name every chapter's subject in a line, so they match every common query and come
// last. (Sphinx scores a title match by the share of the title the words fill: without this, an exercise's short
// title beats the chapter that teaches the subject.)
var Scorer = {
  score: (result) => {
    const [docname, , , , score] = result;
    if (docname === "index" || docname.endsWith("/index")) return score - 30;
    return docname.startsWith("chapters/") ? score + 30 : score;
  },
  objNameMatch: 11,
  objPartialMatch: 6,
  objPrio: { 0: 15, 1: 5, 2: -5 },
  objPrioDefault: 0,
  title: 15,
  partialTitle: 7,
  term: 5,
  partialTerm: 2,
};
