/** Object counts from `git index-pack -v`, for the progress line (objects and deltas done). */

/** How far one index-pack is: objects received (or indexed) and deltas resolved, of totals. */
export interface ObjectCounts {
  objects: number;
  objectsTotal: number;
  deltas: number;
  deltasTotal: number;
}

const OBJECTS = /^(?:Receiving|Indexing) objects:\s+\d+% \((\d+)\/(\d+)\)/;
const DELTAS = /^Resolving deltas:\s+\d+% \((\d+)\/(\d+)\)/;

/**
 * Reads index-pack's stderr to its end: each progress update (`-v`) goes to `onCounts`; returns
 * the rest of the text (what an error message should show), progress lines left out.
 */
export async function readIndexPackStderr(
  stderr: ReadableStream<Uint8Array>,
  onCounts: (counts: ObjectCounts) => void,
): Promise<string> {
  const counts: ObjectCounts = { objects: 0, objectsTotal: 0, deltas: 0, deltasTotal: 0 };
  const kept: string[] = [];
  let pending = "";
  const take = (segment: string) => {
    const objects = OBJECTS.exec(segment);
    const deltas = objects ? null : DELTAS.exec(segment);
    if (objects) {
      counts.objects = Number(objects[1]);
      counts.objectsTotal = Number(objects[2]);
      onCounts({ ...counts });
    } else if (deltas) {
      counts.deltas = Number(deltas[1]);
      counts.deltasTotal = Number(deltas[2]);
      onCounts({ ...counts });
    } else if (segment.trim() !== "") kept.push(segment);
  };
  const decoder = new TextDecoder();
  for await (const chunk of stderr) {
    const segments = (pending + decoder.decode(chunk, { stream: true })).split(/[\r\n]/);
    pending = segments.pop()!;
    segments.forEach(take);
  }
  take(pending + decoder.decode());
  return kept.join("\n");
}
