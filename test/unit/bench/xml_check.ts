// A strict little well-formedness check for the SVG we emit: every tag closes in order, attribute
// values are quoted, and text holds no raw '<' or stray '&'. Returns the elements seen.
export interface XmlElement {
  name: string;
  attrs: Record<string, string>;
}

export function checkWellFormed(xml: string): XmlElement[] {
  const stack: string[] = [];
  const seen: XmlElement[] = [];
  const tag = /<(\/?)([A-Za-z][\w:-]*)((?:\s+[\w:-]+="[^"<]*")*)\s*(\/?)>/y;
  let i = 0;
  let roots = 0;
  while (i < xml.length) {
    const lt = xml.indexOf("<", i);
    const text = xml.slice(i, lt < 0 ? xml.length : lt);
    if (/&(?!(amp|lt|gt|quot|apos|#\d+);)/.test(text)) {
      throw new Error(`stray '&' in text near offset ${i}: ${JSON.stringify(text.slice(0, 40))}`);
    }
    if (lt < 0) break;
    tag.lastIndex = lt;
    const m = tag.exec(xml);
    if (!m) throw new Error(`malformed tag at offset ${lt}: ${JSON.stringify(xml.slice(lt, lt + 60))}`);
    const [, closing, name, attrText, selfClosing] = m as unknown as [string, string, string, string, string];
    if (closing) {
      const open = stack.pop();
      if (open !== name) throw new Error(`</${name}> closes <${open}> at offset ${lt}`);
    } else {
      if (stack.length === 0 && ++roots > 1) throw new Error(`second root element <${name}> at offset ${lt}`);
      const attrs: Record<string, string> = {};
      for (const a of attrText.matchAll(/([\w:-]+)="([^"]*)"/g)) attrs[a[1] as string] = a[2] as string;
      seen.push({ name, attrs });
      if (!selfClosing) stack.push(name);
    }
    i = tag.lastIndex;
  }
  if (stack.length) throw new Error(`unclosed elements: ${stack.join(" > ")}`);
  if (roots !== 1) throw new Error(`expected one root element, found ${roots}`);
  return seen;
}
