-- What the runbooks run by hand to confirm an alert, around a preset's own blocks.
-- {finished} is a preset's finished block (columns id, queue, done, processing,
-- wait, finished, as every preset's), {queue} the queue's name.

-- name: finished_summary
-- The queue's jobs finished in the block's span: how many, how many failed, the
-- failure ratio, and when the last one finished.
SELECT count(*) AS finished,
       count(*) FILTER (WHERE NOT f.done) AS failed,
       round(count(*) FILTER (WHERE NOT f.done)::numeric / nullif(count(*), 0), 3)
           AS failure_ratio,
       to_timestamp(max(f.finished)) AS last_finished
FROM ({finished}) AS f(id, queue, done, processing, wait, finished)
WHERE f.queue = {queue};
