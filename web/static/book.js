// Two things the book adds to the theme's pages.
document.addEventListener("DOMContentLoaded", () => {
  // A figure opens at its full size when tapped or clicked (the model map is wider than a phone).
  document.querySelectorAll("figure img, .cell_output img").forEach((img) => {
    if (img.closest("a")) return;
    const link = document.createElement("a");
    link.href = img.getAttribute("src");
    link.className = "zoom";
    img.replaceWith(link);
    link.appendChild(img);
  });
  // A search result's line is taken from the page's article, not from the buttons above it.
  if (window.Search && Search.htmlToText) {
    const whole = Search.htmlToText;
    Search.htmlToText = (html, anchor) => {
      const page = new DOMParser().parseFromString(html, "text/html");
      const article = page.querySelector("article.bd-article");
      if (!article || anchor) return whole(html, anchor);
      article.querySelectorAll(".headerlink, script, style").forEach((e) => e.remove());
      return article.textContent;
    };
  }
});
