import { describe, expect, test } from "bun:test";
import { polishResultText, workspaceRelative } from "../../src/agents/polish.ts";
import { makeScrubber, scrubDeep } from "../../src/agents/scrub.ts";

const sign = (p: string) => `https://rc.example/files/ctr_1/${p}?exp=1&sig=ab`;

describe("result_text polishing", () => {
  test.each([
    ["chart.png", "chart.png"],
    ["./out/a b.png", "out/a b.png"],
    ["/workspace/x/y.png", "x/y.png"],
    ["out/../chart.png", "chart.png"],
    ["../etc/passwd", null],
    ["/etc/passwd", null],
    ["https://cdn.example/x.png", null],
    ["data:image/png;base64,AAAA", null],
    ["//cdn.example/x.png", null],
  ])("workspaceRelative(%p) = %p", (ref, expected) => {
    expect(workspaceRelative(ref)).toBe(expected);
  });

  test("normalises markdown and rewrites workspace images only", () => {
    const input = [
      "Here is the chart:  \r",
      "",
      "",
      "",
      "![Sales](chart.png) and ![remote](https://img.example/a.png)",
      '<img src="/workspace/plots/p.svg" alt="p"> <img src="http://x/y.png">',
      "```python",
      "![not an image](inside.png)   ",
      "print(1)",
    ].join("\n");
    expect(polishResultText(input, sign)).toBe(
      [
        "Here is the chart:",
        "",
        `![Sales](${sign("chart.png")}) and ![remote](https://img.example/a.png)`,
        `<img src="${sign("plots/p.svg").replace(/&/g, "&amp;")}" alt="p"> <img src="http://x/y.png">`,
        "```python",
        "![not an image](inside.png)",
        "print(1)",
        "```",
      ].join("\n"),
    );
  });

  test.each([
    ["unquoted <img src>", "<img src=chart.png alt=c>", `<img src="${sign("chart.png").replace(/&/g, "&amp;")}" alt=c>`],
    ["an angle-bracket destination with spaces", "![s](<dir with space/my pic.png>)", `![s](<${sign("dir with space/my pic.png")}>)`],
    ["escaped parentheses in the name", "![6](par\\(1\\).png)", `![6](${sign("par(1).png").replace("(", "%28").replace(")", "%29")})`],
    ["balanced parentheses in the name", "![6](par(1).png)", `![6](${sign("par(1).png").replace("(", "%28").replace(")", "%29")})`],
    ["parentheses in an angle-bracket destination", "![7](<par(1).png>)", `![7](<${sign("par(1).png").replace("(", "%28").replace(")", "%29")}>)`],
    ["a title in single quotes", "![a](a.png 'T')", `![a](${sign("a.png")} 'T')`],
  ])("rewrites %s", (_what, input, expected) => {
    expect(polishResultText(input, sign)).toBe(expected);
  });

  test("reference-style images: the definition they use is rewritten, a plain link's is not", () => {
    const input = ["![chart][c] and ![Logo] and ![pie][]", "", "[c]: chart.png", "[logo]: <img/logo 1.png> \"Logo\"", "[pie]: /workspace/pie.png", "[doc]: notes.md"].join("\n");
    expect(polishResultText(input, sign)).toBe(
      ["![chart][c] and ![Logo] and ![pie][]", "", `[c]: ${sign("chart.png")}`, `[logo]: <${sign("img/logo 1.png")}> "Logo"`, `[pie]: ${sign("pie.png")}`, "[doc]: notes.md"].join("\n"),
    );
  });

  test("inline code spans stay as written, as fenced code does", () => {
    const input = "Write `![code](chart.png)` or ``![x](a.png) ` `` to get ![real](chart.png); a lone ` is text: ![b](b.png)";
    expect(polishResultText(input, sign)).toBe(
      `Write \`![code](chart.png)\` or \`\`![x](a.png) \` \`\` to get ![real](${sign("chart.png")}); a lone \` is text: ![b](${sign("b.png")})`,
    );
  });

  test("image with a title keeps it; a closed fence stays closed", () => {
    expect(polishResultText('![a](a.png "Title")\n~~~\nx\n~~~\n', sign)).toBe(`![a](${sign("a.png")} "Title")\n~~~\nx\n~~~`);
  });
});

describe("secret scrubbing", () => {
  test("replaces every value, longest first, deep", () => {
    const scrub = makeScrubber(["s3cr3t-value", "s3cr3t", "ab"]);
    expect(scrub("x=s3cr3t-value y=s3cr3t z=ab")).toBe("x=[redacted secret] y=[redacted secret] z=ab");
    expect(scrubDeep({ a: ["s3cr3t"], b: 1 }, scrub)).toEqual({ a: ["[redacted secret]"], b: 1 });
    expect(makeScrubber([])("s3cr3t")).toBe("s3cr3t");
  });
});
