-- The lock rows (32 x 32, a recursion within MySQL's default
-- cte_max_recursion_depth); a second run inserts nothing.
INSERT IGNORE INTO {{aggregate_locks}} (k)
WITH RECURSIVE s (n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM s WHERE n < 31)
SELECT a.n * 32 + b.n FROM s a CROSS JOIN s b
