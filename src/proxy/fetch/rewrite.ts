/**
 * The fetch-response rewrite: forward the origin's sections unchanged and put a `packfile-uris`
 * section right before its `packfile` section; the pack itself streams through byte for byte.
 */
import { type Pkt, pktBytes, PktLineReader } from "../../git/pktline.ts";

const PACKFILE_HEADER = new TextEncoder().encode("packfile\n");

function isPackfileHeader(pkt: Pkt, sidebandAll: boolean): boolean {
  if (pkt.type !== "data") return false;
  let data = pkt.data;
  if (sidebandAll) {
    if (data[0] !== 1) return false;
    data = data.subarray(1);
  }
  return data.length === PACKFILE_HEADER.length && data.every((b, i) => b === PACKFILE_HEADER[i]);
}

/**
 * Returns the origin's fetch response with `section` (an encoded `packfile-uris` section) inserted
 * before the `packfile` section. A response without a packfile section passes through unchanged.
 */
export function injectBeforePackfile(
  originBody: ReadableStream<Uint8Array>,
  section: Uint8Array,
  opts: { sidebandAll: boolean },
): ReadableStream<Uint8Array> {
  const reader = new PktLineReader(originBody);
  let rest: ReadableStreamDefaultReader<Uint8Array> | null = null;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (rest) {
        const { done, value } = await rest.read();
        if (done) controller.close();
        else controller.enqueue(value);
        return;
      }
      const pkt = await reader.read();
      if (pkt === null) {
        controller.close();
        return;
      }
      if (isPackfileHeader(pkt, opts.sidebandAll)) {
        controller.enqueue(section);
        controller.enqueue(pktBytes(pkt));
        rest = reader.remainder().getReader();
        return;
      }
      controller.enqueue(pktBytes(pkt));
    },
    async cancel(reason) {
      if (rest) await rest.cancel(reason);
      else await reader.cancel(reason);
    },
  });
}
